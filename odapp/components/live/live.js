// Live curves: a slider (the page's ε) and canvas charts redrawn at every animation frame while it is dragged,
// from tables the server sent once (odcore.privacy.live). On release the value goes to the server (one rerun).
// Plain canvas, no library. Spec of `data`: odapp/components/live/__init__.py.

const FORMULAS = {
  // e^ε/(1+e^ε), or πe^ε/(πe^ε + 1 − π) with a prior: the posterior bound (Houssiau et al. 2022, Methods)
  bound: (x, e, a) => {
    const s = e * (a.scale || 1), p = a.prior === undefined ? 0.5 : a.prior;
    return p * Math.exp(s) / (p * Math.exp(s) + 1 - p);
  },
  // basic composition k·ε (Dwork & Roth 2014, Thm 3.16), k = x·mult
  basic: (x, e, a) => x * (a.mult || 1) * e * (a.scale || 1),
  // advanced composition sqrt(2k ln(1/δ'))·ε + k·ε·(e^ε − 1) (Dwork & Roth 2014, Thm 3.20)
  advanced: (x, e, a) => {
    const k = x * (a.mult || 1), s = e * (a.scale || 1);
    return Math.sqrt(2 * k * Math.log(1 / a.delta)) * s + k * s * Math.expm1(s);
  },
};

function interpolate(t, e) {
  // Same arithmetic as odcore.privacy.live.interpolate (clamped, "lin" or "loglog").
  const g = t.grid, n = g.length;
  const v = Math.min(Math.max(e, g[0]), g[n - 1]);
  let lo = 0, hi = n - 1;
  while (hi - lo > 1) { const mid = (lo + hi) >> 1; if (g[mid] <= v) lo = mid; else hi = mid; }
  const a = t.values[lo], b = t.values[hi], out = new Array(a.length);
  if (t.interp === "loglog") {
    const w = (Math.log(v) - Math.log(g[lo])) / (Math.log(g[hi]) - Math.log(g[lo]));
    for (let j = 0; j < a.length; j++) {
      out[j] = (a[j] > 0 && b[j] > 0) ? Math.exp(Math.log(a[j]) * (1 - w) + Math.log(b[j]) * w)
        : (a[j] === null || b[j] === null ? NaN : a[j] * (1 - w) + b[j] * w);
    }
  } else {
    const w = (v - g[lo]) / (g[hi] - g[lo]);
    for (let j = 0; j < a.length; j++) out[j] = (a[j] === null || b[j] === null) ? NaN : a[j] * (1 - w) + b[j] * w;
  }
  return out;
}

function seriesAt(s, e) {
  if (s.table) return { x: s.table.x, y: interpolate(s.table, e) };
  const f = FORMULAS[s.formula], a = s.args || {};
  return { x: s.x, y: s.x.map((x) => f(x, e, a)) };
}

function fmt(v, how) {
  if (!Number.isFinite(v)) return "–";
  if (how === "pct") return (100 * v).toFixed(1) + " %";
  if (Math.abs(v) >= 1000) return Math.round(v).toLocaleString("en");
  if (how === "tick" && Math.abs(v - Math.round(v)) < 1e-9) return String(Math.round(v));
  return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
}

const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"];

function niceTicks(lo, hi, n) {
  const span = hi - lo || 1, step0 = span / n, mag = Math.pow(10, Math.floor(Math.log10(step0)));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => span / s <= n) || 10 * mag;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + 1e-9 * span; v += step) out.push(v);
  return out;
}

function logTicks(lo, hi) {
  const out = [];
  for (let p = Math.floor(Math.log10(lo)); p <= Math.ceil(Math.log10(hi)); p++) {
    for (const m of [1, 3]) { const v = m * Math.pow(10, p); if (v >= lo && v <= hi) out.push(v); }
  }
  return out;
}

function drawChart(c, spec, e, dark) {
  const canvas = c.canvas, dpr = window.devicePixelRatio || 1;
  const W = Math.max(200, c.box.clientWidth), H = spec.height || 340;
  if (canvas.width !== Math.round(W * dpr) || canvas.height !== Math.round(H * dpr)) {
    canvas.width = Math.round(W * dpr); canvas.height = Math.round(H * dpr);
    canvas.style.width = W + "px"; canvas.style.height = H + "px";
  }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, W, H);
  const fg = dark ? "#e6e6e6" : "#262730", grid = dark ? "#444" : "#e5e5e5";
  const data = spec.series.map((s) => seriesAt(s, e));
  const L = 62, R = 12, T = 30, B = 44, pw = W - L - R, ph = H - T - B;
  const xs = data.flatMap((d) => d.x), xlo = Math.min(...xs), xhi = Math.max(...xs);
  let ylo = spec.ymin, yhi = spec.ymax;
  if (ylo === null || ylo === undefined || yhi === null || yhi === undefined) {
    const ys = data.flatMap((d) => d.y).filter((v) => Number.isFinite(v) && (!spec.ylog || v > 0));
    const lo = Math.min(...ys), hi = Math.max(...ys);
    if (ylo === null || ylo === undefined) ylo = spec.ylog ? lo / 1.2 : Math.min(0, lo);
    if (yhi === null || yhi === undefined) yhi = spec.ylog ? hi * 1.2 : hi * 1.05;
  }
  const ty = spec.ylog ? (v) => Math.log10(v) : (v) => v;
  const X = (x) => L + (x - xlo) / (xhi - xlo || 1) * pw;
  const Y = (y) => T + ph - (ty(y) - ty(ylo)) / (ty(yhi) - ty(ylo) || 1) * ph;
  ctx.font = "12px sans-serif"; ctx.fillStyle = fg; ctx.strokeStyle = grid; ctx.lineWidth = 1;
  const yt = spec.ylog ? logTicks(ylo, yhi) : niceTicks(ylo, yhi, 6);
  ctx.textAlign = "right"; ctx.textBaseline = "middle";
  for (const v of yt) {
    ctx.beginPath(); ctx.moveTo(L, Y(v)); ctx.lineTo(L + pw, Y(v)); ctx.stroke();
    ctx.fillText(spec.ypct ? Math.round(100 * v) + " %" : fmt(v, "tick"), L - 6, Y(v));
  }
  ctx.textAlign = "center"; ctx.textBaseline = "top";
  for (const v of niceTicks(xlo, xhi, 8)) {
    ctx.beginPath(); ctx.moveTo(X(v), T); ctx.lineTo(X(v), T + ph); ctx.stroke();
    ctx.fillText(fmt(v, "tick"), X(v), T + ph + 5);
  }
  ctx.fillText(spec.xlabel || "", L + pw / 2, H - 18);
  ctx.save(); ctx.translate(14, T + ph / 2); ctx.rotate(-Math.PI / 2); ctx.fillText(spec.ylabel || "", 0, -6);
  ctx.restore();
  ctx.font = "bold 14px sans-serif"; ctx.textAlign = "left"; ctx.fillText(spec.title.replace("{e}", e.toFixed(2)), L, 6);
  ctx.save(); ctx.beginPath(); ctx.rect(L, T, pw, ph); ctx.clip();
  for (const m of spec.vlines || []) {
    ctx.strokeStyle = m.color || "#888"; ctx.setLineDash([4, 4]); ctx.beginPath();
    ctx.moveTo(X(m.x), T); ctx.lineTo(X(m.x), T + ph); ctx.stroke();
    ctx.fillStyle = m.color || "#888"; ctx.font = "12px sans-serif"; ctx.fillText(m.label || "", X(m.x) + 4, T + 4);
  }
  for (const m of spec.hlines || []) {
    if (m.y < ylo || m.y > yhi) continue;
    ctx.strokeStyle = m.color || "#d95f02"; ctx.setLineDash([2, 4]); ctx.beginPath();
    ctx.moveTo(L, Y(m.y)); ctx.lineTo(L + pw, Y(m.y)); ctx.stroke();
    ctx.fillStyle = m.color || "#d95f02"; ctx.fillText(m.label || "", L + 4, Y(m.y) - 16);
  }
  data.forEach((d, i) => {
    const s = spec.series[i];
    ctx.strokeStyle = s.color || PALETTE[i % PALETTE.length]; ctx.lineWidth = s.width || 2;
    ctx.setLineDash(s.dash || []); ctx.beginPath();
    let on = false;
    for (let j = 0; j < d.x.length; j++) {
      const y = d.y[j];
      if (!Number.isFinite(y) || (spec.ylog && y <= 0)) { on = false; continue; }
      if (on) ctx.lineTo(X(d.x[j]), Y(y)); else { ctx.moveTo(X(d.x[j]), Y(y)); on = true; }
    }
    ctx.stroke();
  });
  ctx.setLineDash([]);
  const pts = spec.points;
  if (pts && Math.abs(pts.at - e) < 1e-9) {   // Monte Carlo points: valid at the ε they were drawn at only
    ctx.strokeStyle = ctx.fillStyle = "#9467bd"; ctx.lineWidth = 1;
    for (let j = 0; j < pts.x.length; j++) {
      ctx.beginPath(); ctx.moveTo(X(pts.x[j]), Y(pts.lo[j])); ctx.lineTo(X(pts.x[j]), Y(pts.hi[j])); ctx.stroke();
      ctx.beginPath(); ctx.arc(X(pts.x[j]), Y(pts.y[j]), 2.5, 0, 2 * Math.PI); ctx.fill();
    }
  }
  for (const r of spec.readouts || []) {
    const d = data[r.series], j = d.x.indexOf(r.x);
    if (j < 0 || !Number.isFinite(d.y[j]) || r.posterior !== undefined) continue;
    ctx.fillStyle = spec.series[r.series].color || PALETTE[r.series % PALETTE.length];
    ctx.beginPath(); ctx.arc(X(r.x), Y(d.y[j]), 5, 0, 2 * Math.PI); ctx.fill();
    ctx.fillStyle = fg; ctx.font = "12px sans-serif"; ctx.fillText(fmt(d.y[j], r.fmt), X(r.x) + 7, Y(d.y[j]) + 4);
  }
  ctx.restore();
  // legend, top right, one line per series
  ctx.font = "12px sans-serif"; ctx.textAlign = "right"; ctx.textBaseline = "middle";
  const ly0 = spec.legend === "top" ? T + 12 : T + ph - 12 - 16 * (spec.series.length - 1);
  spec.series.forEach((s, i) => {
    const y = ly0 + 16 * i, x = L + pw - 8;
    ctx.fillStyle = fg; ctx.fillText(s.name, x - 30, y);
    ctx.strokeStyle = s.color || PALETTE[i % PALETTE.length]; ctx.lineWidth = s.width || 2;
    ctx.setLineDash(s.dash || []); ctx.beginPath(); ctx.moveTo(x - 24, y); ctx.lineTo(x, y); ctx.stroke();
  });
  ctx.setLineDash([]);
  return data;
}

export default function (component) {
  const { data, parentElement, setStateValue } = component;
  let st = parentElement.__odlive;
  if (!st) {
    const root = document.createElement("div");
    root.className = "odlive";
    root.innerHTML = '<div class="odlive-control"><label class="odlive-label"></label>' +
      '<input class="odlive-range" type="range"><output class="odlive-out"></output></div>' +
      '<div class="odlive-readout"></div><div class="odlive-charts"></div>';
    parentElement.appendChild(root);
    st = parentElement.__odlive = { root, charts: [], value: data.value, dragging: false, pending: false };
    const input = root.querySelector(".odlive-range");
    st.input = input;
    const frame = () => { st.pending = false; paint(st); };
    input.addEventListener("input", () => {
      st.value = parseFloat(input.value);
      if (!st.pending) { st.pending = true; requestAnimationFrame(frame); }
    });
    input.addEventListener("pointerdown", () => { st.dragging = true; });
    input.addEventListener("pointerup", () => { st.dragging = false; });
    input.addEventListener("change", () => {
      st.dragging = false;
      st.value = parseFloat(input.value);
      st.sent = st.value;
      st.setStateValue(st.spec.name, st.value);   // the page's setting: one rerun on release
    });
    new ResizeObserver(() => paint(st)).observe(root);
  }
  st.setStateValue = setStateValue;
  st.spec = data;
  const input = st.input;
  input.min = data.min; input.max = data.max; input.step = data.step;
  input.setAttribute("aria-label", data.label);
  st.root.querySelector(".odlive-label").textContent = data.label;
  st.root.dataset.name = data.name;
  if (!st.dragging) { st.value = data.value; input.value = data.value; }
  const box = st.root.querySelector(".odlive-charts");
  if (st.charts.length !== data.charts.length) {
    box.innerHTML = "";
    st.charts = data.charts.map(() => {
      const el = document.createElement("div"); el.className = "odlive-chart";
      const canvas = document.createElement("canvas"); el.appendChild(canvas); box.appendChild(el);
      return { box: el, canvas };
    });
  }
  box.style.gridTemplateColumns = `repeat(${data.columns || 1}, minmax(0, 1fr))`;
  paint(st);
}

function paint(st) {
  const t0 = performance.now();
  const e = st.value, spec = st.spec, dark = document.body && getComputedStyle(document.body).color === "rgb(250, 250, 250)";
  st.root.querySelector(".odlive-out").textContent = e.toFixed(2);
  const values = {};
  const reads = [];
  spec.charts.forEach((c, i) => {
    const d = drawChart(st.charts[i], c, e, dark);
    values[c.id] = Object.fromEntries(c.series.map((s, j) => [s.key || s.name, d[j].y]));
    for (const r of c.readouts || []) {
      const j = d[r.series].x.indexOf(r.x);
      if (j < 0) continue;
      const v = d[r.series].y[j];
      reads.push(`${r.label} ${fmt(r.posterior === undefined ? v : FORMULAS.bound(0, v, { prior: r.posterior }), r.fmt)}`);
    }
  });
  st.root.querySelector(".odlive-readout").textContent = reads.join(" · ");
  // For the tests and the browser benchmark: the values drawn and when each frame was painted.
  const g = (window.odlive = window.odlive || {});
  const rec = (g[spec.name + ":" + spec.page] = g[spec.name + ":" + spec.page] || { paints: [] });
  rec.epsilon = e; rec.values = values;
  const t1 = performance.now();
  rec.paints.push(t1); (rec.draw = rec.draw || []).push(t1 - t0);
  if (rec.paints.length > 2000) { rec.paints.splice(0, 1000); rec.draw.splice(0, 1000); }
}
