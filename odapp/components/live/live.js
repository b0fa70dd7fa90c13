// Live curves: a slider (the page's ε) and canvas charts redrawn at every animation frame while it is dragged,
// from tables the server sent once (odcore.privacy.live). On release the value goes to the server (one rerun).
// Plain canvas, no library. Spec of `data`: odapp/components/live/__init__.py.

const FORMULAS = {
  // e^ε/(1+e^ε), or πe^ε/(πe^ε + 1 − π) with a prior: the posterior bound (Houssiau et al. 2022, Methods)
  bound: (x, v, a) => {
    const s = v.epsilon * (a.scale || 1), p = a.prior === undefined ? 0.5 : a.prior;
    return p * Math.exp(s) / (p * Math.exp(s) + 1 - p);
  },
  // basic composition k·ε (Dwork & Roth 2014, Thm 3.16), k = x·mult
  basic: (x, v, a) => x * (a.mult || 1) * v.epsilon * (a.scale || 1),
  // advanced composition sqrt(2k ln(1/δ'))·ε + k·ε·(e^ε − 1) (Dwork & Roth 2014, Thm 3.20)
  advanced: (x, v, a) => {
    const k = x * (a.mult || 1), s = v.epsilon * (a.scale || 1);
    return Math.sqrt(2 * k * Math.log(1 / a.delta)) * s + k * s * Math.expm1(s);
  },
  // against δ' = x for k = a.k counts (the ε-against-δ chart): basic k·ε (any δ) and advanced at δ' = x
  basic_k: (x, v, a) => a.k * v.epsilon,
  advanced_at: (x, v, a) => FORMULAS.advanced(a.k, v, { delta: x }),
  identity: (x) => x,
  // e^x/(1+e^x) against x = ε·scale: the per-trip bound as a curve over ε
  bound_x: (x, v, a) => 1 / (1 + Math.exp(-x * (a.scale || 1))),
  // P(c + Laplace(b) ≥ τ), b = sensitivity/ε: odcore.privacy.release.release_probability
  release: (x, v, a) => {
    const b = a.sensitivity / v.epsilon, d = v.threshold - x;
    return d >= 0 ? 0.5 * Math.exp(-d / b) : 1 - 0.5 * Math.exp(d / b);
  },
  // the same for the count of pair x (x = 1, 2, … indexes a.counts), plus a.add: a round's known pairs, the person
  // out (add 0) or in (add 1)
  release_pair: (x, v, a) => FORMULAS.release(a.counts[x - 1] + (a.add || 0), v, a),
  // the Laplace density of c + Lap(b), b = sensitivity/ε, at x: what the noise makes of a true count c
  // (odcore.report.teaching.NoisePicture.density)
  laplace: (x, v, a) => {
    const b = a.sensitivity / v.epsilon;
    return Math.exp(-Math.abs(x - center(a, v)) / b) / (2 * b);
  },
  // the central 95 % range of c + Lap(b): c ∓ b·ln 20 (odcore.report.teaching.noise_picture)
  low95: (x, v, a) => center(a, v) - a.sensitivity / v.epsilon * Math.log(20),
  high95: (x, v, a) => center(a, v) + a.sensitivity / v.epsilon * Math.log(20),
  release_at: (x, v, a) => FORMULAS.release(center(a, v), v, a),
};

function center(a, v) {
  // a true count: a number, or a slider's value (a.center names it) moved by a.shift, reflected when that is < 0
  if (typeof a.center === "number") return a.center;
  const c = v[a.center], s = a.shift || 0;
  return c + s >= 0 ? c + s : c - s;
}

function posterior(value, prior) { return FORMULAS.bound(0, { epsilon: value }, { prior }); }

// The most often any attacker starting from `prior` is right under (ε, δ): the largest π·TPR + (1 − π)(1 − FPR) over
// the corners of the (ε, δ) region (Kairouz, Oh and Viswanath 2015), as odcore.report.facts.success_bound; below 1
// whenever δ < 1, however close.
function successBound(eps, delta, prior) {
  const d = delta || 0, p = prior === undefined ? 0.5 : prior, e = Math.exp(Math.min(eps, 700));
  const f = (1 - d) / (1 + e);
  const corners = [[0, d], [f, Math.min(1, e * f + d)], [1 - d, 1], [0, 0], [1, 1]];
  const best = Math.min(1, Math.max(...corners.map(([x, t]) => p * t + (1 - p) * (1 - x))));
  return best >= 1 && d < 1 && p > 0 && p < 1 ? 1 - Number.EPSILON : best;
}

function linspace(lo, hi, n) { return Array.from({ length: n }, (_, i) => lo + (hi - lo) * i / (n - 1)); }

function resolve(y, v) {   // a number, the name of a control, or a true count ({center, shift}: see center())
  return typeof y === "string" ? v[y] : (y !== null && typeof y === "object" ? center(y, v) : y);
}

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

function seriesAt(s, v) {
  if (s.y && !s.at) return { x: s.x, y: s.y };   // a fixed curve (e.g. against ε itself)
  if (s.at) {   // drawn at the page's setting only (a curve the server computed at that setting)
    const here = Object.entries(s.at).every(([k, a]) => Math.abs(v[k] - a) < 1e-9);
    return { x: s.x, y: here ? s.y : s.y.map(() => NaN) };
  }
  if (s.table) return { x: s.table.x, y: interpolate(s.table, v[s.table.over || "epsilon"]) };
  const f = FORMULAS[s.formula], a = s.args || {};
  // x from the spec, or 0..max(mult·control, floor) when the range follows a control (the threshold), or the
  // noisy counts around a true count (c ± 8b and the threshold ± 2b, as NoisePicture.density)
  let x = s.x;
  if (!x && s.span.noise) {
    const c = center(a, v), b = a.sensitivity / v.epsilon, t = v.threshold;
    x = linspace(Math.min(c - 8 * b, t - 2 * b), Math.max(c + 8 * b, t + 2 * b), s.span.n);
  } else if (!x) x = linspace(0, Math.max(s.span.mult * v[s.span.of], s.span.floor), s.span.n);
  return { x, y: x.map((xx) => f(xx, v, a)) };
}

function published(pairs, v) {
  // Coherent noise: pair i's noisy count is c_i + b·u_i with u_i its unit-Laplace draw (the seed's), b = sens/ε.
  // Returns, per true count, how many of its draws are published (u sorted from the largest down: a binary search,
  // not a walk over every draw), their total (exact while below each count's cap of kept draws) and the scale b.
  const b = pairs.sensitivity / v.epsilon, tau = v.threshold, ks = new Array(pairs.c.length);
  let n = 0, capped = false;
  for (let i = 0; i < pairs.c.length; i++) {
    const u = pairs.u[i], need = (tau - pairs.c[i]) / b;
    let lo = 0, hi = u.length;   // the first index whose draw is below need
    while (lo < hi) { const mid = (lo + hi) >> 1; if (u[mid] >= need) lo = mid + 1; else hi = mid; }
    ks[i] = lo; n += lo;
    if (lo === u.length && u.length < pairs.n[i]) capped = true;
  }
  return { ks, b, n, capped };
}

function expected(pairs, v) {
  let s = 0;
  pairs.c.forEach((c, i) => { s += pairs.n[i] * FORMULAS.release(c, v, { sensitivity: pairs.sensitivity }); });
  return s;
}

function fmt(v, how) {
  if (!Number.isFinite(v)) return "–";
  if (how === "pct") {   // as odcore.numbers.percent_text: more decimals, up to 4, then "> 99.9999 %"
    for (let d = 1; d <= 4; d++) {
      const t = (100 * v).toFixed(d);
      if (!((v < 1 && parseFloat(t) >= 100) || (v > 0 && parseFloat(t) <= 0))) return t + " %";
    }
    return v > 0.5 ? "> 99.9999 %" : "< 0.0001 %";
  }
  if (how === "one") return v.toFixed(1);
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

function powerTicks(lo, hi, n) {
  // powers of ten from the top down, every step-th, at most n of them (10⁻², 10⁻⁸, 10⁻¹⁴, … on a δ axis)
  const top = Math.floor(Math.log10(hi) + 1e-9), bottom = Math.ceil(Math.log10(lo) - 1e-9);
  const step = Math.max(1, Math.ceil((top - bottom + 1) / n)), out = [];
  for (let p = top; p >= bottom; p -= step) out.unshift(Math.pow(10, p));
  return out;
}

function powerText(v) {   // 10⁻¹² as the plotly charts write it
  const sup = { "-": "\u207b", 0: "\u2070", 1: "\u00b9", 2: "\u00b2", 3: "\u00b3", 4: "\u2074", 5: "\u2075",
                6: "\u2076", 7: "\u2077", 8: "\u2078", 9: "\u2079" };
  const p = Math.round(Math.log10(v));
  return "10" + String(p).split("").map((c) => sup[c]).join("");
}

// Type sizes (px): those of the app's plotly charts (odcore.report.figures.template), on a screen (ticks 15, axis
// titles 16, title 19, legend 14) and in projector mode (ticks 19, axis titles 20, title 23, legend 18), so a live
// chart beside a plotly chart reads alike.
const TYPE = {
  screen: { tick: 15, label: 16, title: 19, legend: 14 },
  projector: { tick: 19, label: 20, title: 23, legend: 18 },
};
const NARROW = 560;   // a chart narrower than this (px) puts its legend under the plot, as projector mode does

function mark(ctx, x, y, r, symbol, open, color) {
  // a point's marker: circle (default), diamond, star or x; open: the outline only (as plotly's "-open" symbols)
  ctx.beginPath();
  if (symbol === "x") {
    ctx.strokeStyle = color; ctx.lineWidth = Math.max(2, 0.6 * r);
    ctx.moveTo(x - r, y - r); ctx.lineTo(x + r, y + r); ctx.moveTo(x + r, y - r); ctx.lineTo(x - r, y + r);
    ctx.stroke(); return;
  }
  if (symbol === "diamond") {
    const d = 1.3 * r;
    ctx.moveTo(x, y - d); ctx.lineTo(x + d, y); ctx.lineTo(x, y + d); ctx.lineTo(x - d, y); ctx.closePath();
  } else if (symbol === "star") {
    for (let k = 0; k < 10; k++) {
      const a = -Math.PI / 2 + k * Math.PI / 5, rr = k % 2 ? 0.55 * r : 1.4 * r;
      ctx.lineTo(x + rr * Math.cos(a), y + rr * Math.sin(a));
    }
    ctx.closePath();
  } else ctx.arc(x, y, r, 0, 2 * Math.PI);
  if (open) { ctx.strokeStyle = color; ctx.lineWidth = 1.5; ctx.stroke(); } else { ctx.fillStyle = color; ctx.fill(); }
}

function isOpen(s, j) { return Array.isArray(s.open) ? !!s.open[j] : !!s.open; }

function wrapWords(ctx, text, width) {
  // lines of whole words no wider than width (a word wider than that has a line of its own; never cut)
  const lines = [];
  let line = "";
  for (const w of text.split(/\s+/).filter(Boolean)) {
    const next = line ? line + " " + w : w;
    if (line && ctx.measureText(next).width > width) { lines.push(line); line = w; } else line = next;
  }
  if (line) lines.push(line);
  return lines.length ? lines : [""];
}

function balanced(ctx, text, width) {
  // as wrapWords, on as few lines, each as short as that allows ("probability the / attacker is right", not
  // "probability the attacker is / right")
  const n = wrapWords(ctx, text, width).length;
  let lo = 0, hi = width;
  while (hi - lo > 2) { const mid = (lo + hi) / 2; if (wrapWords(ctx, text, mid).length > n) lo = mid; else hi = mid; }
  return wrapWords(ctx, text, hi);
}

function drawChart(c, spec, v, dark, pairs, projector) {
  const canvas = c.canvas, dpr = window.devicePixelRatio || 1;
  // the width from the ResizeObserver (reading clientWidth here forced a layout of the whole page every frame)
  const W = Math.max(200, c.width || c.box.clientWidth);
  const fs = projector ? TYPE.projector : TYPE.screen;
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  const fg = dark ? "#e6e6e6" : "#262730", grid = dark ? "#444" : "#e5e5e5";
  const data = spec.series.map((s) => seriesAt(s, v));
  const pts = spec.published && pairs ? published(pairs, v) : null;
  const xs = data.flatMap((d) => d.x);
  let xlo = Math.min(...xs), xhi = Math.max(...xs);
  if (typeof spec.xmax === "number") xhi = spec.xmax;
  else if (spec.xmax) xhi = Math.max(spec.xmax.mult * v[spec.xmax.of], spec.xmax.floor);
  if (spec.xmin !== undefined) xlo = spec.xmin;
  let ylo = spec.ymin, yhi = spec.ymax;
  if (ylo === null || ylo === undefined || yhi === null || yhi === undefined) {
    const ys = data.flatMap((d) => d.y).filter((y) => Number.isFinite(y) && (!spec.ylog || y > 0));
    const lo = Math.min(...ys), hi = Math.max(...ys);
    if (ylo === null || ylo === undefined) ylo = spec.ylog ? lo / 1.2 : Math.min(0, lo);
    if (yhi === null || yhi === undefined) yhi = spec.ylog ? hi * 1.2 : hi * 1.05;
  }
  // margins from the text they hold: the y ticks' widest label, the title's lines (wrapped at spaces to the
  // chart's width, never cut), the x ticks and label, and under the plot the legend when it goes there
  const yt = spec.ylog ? logTicks(ylo, yhi) : niceTicks(ylo, yhi, 6);
  const ytext = (t) => (spec.ypct ? Math.round(100 * t) + " %" : fmt(t, "tick"));
  ctx.font = `${fs.tick}px sans-serif`;
  const tickW = Math.max(0, ...yt.map((t) => ctx.measureText(ytext(t)).width));
  // the y axis title on as many lines (wrapped at spaces) as keep it within the plot's height, not over the title
  const ph = (spec.height || 340) - 74, ylh = Math.round(fs.label * 1.15);
  ctx.font = `${fs.label}px sans-serif`;
  const ylines = spec.ylabel ? balanced(ctx, spec.ylabel, ph - 4) : [];
  const ylabelW = Math.max(0, ...ylines.map((l) => ctx.measureText(l).width));
  const L = Math.max(62, Math.ceil(tickW + 14 + fs.label * 1.5 + ylh * Math.max(0, ylines.length - 1)));
  ctx.font = `bold ${fs.title}px sans-serif`;
  const title = spec.title.replace(/\{(\w+)\}/g, (_, k) => fmt(v[k], "tick"));
  const tx = projector ? 8 : L, lines = wrapWords(ctx, title, W - tx - 8);
  const titleW = Math.max(...lines.map((l) => ctx.measureText(l).width));
  const th = Math.round(fs.title * 1.25);
  // the right margin holds the last x tick's label (the half of it past the plot's end), or the bars' axis
  const txf = spec.xlog ? (x) => Math.log10(x) : (x) => x;
  const xTicks = (w) => {
    const nx = Math.max(3, Math.min(8, Math.floor(w / (fs.tick * (spec.xlog ? 4 : 3)))));
    return spec.xtickvals ? spec.xtickvals.filter((t) => t >= xlo && t <= xhi)
      : spec.xlog ? powerTicks(xlo, xhi, nx)
        : niceTicks(xlo, xhi, nx).filter((t) => spec.xticks !== "int" || Math.abs(t - Math.round(t)) < 1e-9);
  };
  const xTickText = (v) => {
    const given = spec.xtickvals ? spec.xticktext[spec.xtickvals.indexOf(v)] : undefined;
    return given !== undefined ? given : spec.xlog ? powerText(v)
      : (spec.xticklabels || {})[String(Math.round(v))] || fmt(v, "tick");
  };
  const R0 = spec.bars ? Math.round(58 * fs.tick / 12) : projector ? 26 : 12;
  let R = R0;
  const ticks0 = spec.bars ? [] : xTicks(W - L - R0);
  if (ticks0.length) {
    const last = ticks0[ticks0.length - 1], f = (txf(last) - txf(xlo)) / (txf(xhi) - txf(xlo) || 1);
    ctx.font = `${fs.tick}px sans-serif`;
    R = Math.max(R0, Math.ceil(ctx.measureText(xTickText(last)).width / 2 + 2 - (1 - f) * (W - L - R0)));
  }
  const T = 8 + lines.length * th + 8;
  const B = fs.tick + 10 + fs.label + 14, pw = W - L - R;
  const lh = Math.round(fs.legend * 1.45);
  const X = (x) => L + (txf(x) - txf(xlo)) / (txf(xhi) - txf(xlo) || 1) * pw;
  const ty = spec.ylog ? (v) => Math.log10(v) : (v) => v;
  const Y = (y) => T + ph - (ty(y) - ty(ylo)) / (ty(yhi) - ty(ylo) || 1) * ph;
  const plot = [L, T, L + pw, T + ph];
  // What is drawn in the plot, in pixels, before anything is painted: the curves (polylines), dots, bars and
  // reference lines mark an occupancy grid, and every text that goes inside the plot (the reference lines'
  // labels, the readouts' values, the legend when it is inside) takes the first of its places where nothing is
  // drawn; a reference line's label with no free place goes under the plot with the legend, a readout's value
  // (also in the readout line above the charts) is left out.
  const occ = occupancy(plot, 3);
  const drawn = [], dots = [];   // for the tests: what a text must not cover
  const hits = [];   // points with a hover text: [x, y, text]
  const color = (s, i) => s.color || PALETTE[i % PALETTE.length];
  const curves = data.map((d, i) => {
    const s = spec.series[i], parts = [];
    if (s.marker) {
      for (let j = 0; j < d.x.length; j++) {
        if (!Number.isFinite(d.y[j])) continue;
        const p = [X(d.x[j]) + (s.offset || 0), Y(d.y[j]), s.marker];
        occ.dot(p[0], p[1], p[2] + 2); dots.push(p);
        if (s.hover && s.hover[j]) hits.push([p[0], p[1], s.hover[j]]);
      }
      if (!s.line) return parts;   // points only, or points joined by a line (line: true)
    }
    let cur = null;
    for (let j = 0; j < d.x.length; j++) {
      const y = d.y[j];
      if (!Number.isFinite(y) || (spec.ylog && y <= 0)) { cur = null; continue; }
      if (!cur) { cur = []; parts.push(cur); }
      if (s.step) {   // a step per point, from halfway to the point before to halfway to the next (plotly's hvh)
        const a = j > 0 ? (d.x[j - 1] + d.x[j]) / 2 : d.x[j] - (d.x[1] - d.x[0]) / 2;
        const b = j < d.x.length - 1 ? (d.x[j] + d.x[j + 1]) / 2 : d.x[j] + (d.x[j] - d.x[j - 1]) / 2;
        cur.push(X(a), Y(y), X(b), Y(y));
        // its text anywhere along the step
        if (s.hover && s.hover[j]) hits.push([(X(a) + X(b)) / 2, Y(y), s.hover[j], Math.abs(X(b) - X(a)) / 2]);
      } else {
        cur.push(X(d.x[j]), Y(y));
        if (s.hover && s.hover[j] && !s.marker) hits.push([X(d.x[j]), Y(y), s.hover[j]]);
      }
    }
    for (const p of parts) { occ.line(p, (s.width || 2) / 2 + 2); drawn.push(p); }
    if (s.fill || s.area) {   // the area under a filled curve is data too: no text on it
      const ybase = Y(Math.max(ylo, 0));
      for (const p of parts) for (let k = 2; k < p.length; k += 2) occ.rect(p[k - 2], Math.min(p[k - 1], p[k + 1]), p[k], ybase);
    }
    return parts;
  });
  let barRects = [];
  if (spec.bars) {   // a histogram behind the curves, on its own log scale (right axis)
    const br = spec.bars, top = Math.log10(Math.max(...br.y)) * 1.08 + 0.05;
    const BY = (y) => T + ph - (Math.log10(y) + 0.05) / (top + 0.05) * ph;
    barRects = br.x.flatMap((x, i) => x - br.w[i] / 2 <= xhi
      ? [[X(x - br.w[i] / 2), BY(br.y[i]), Math.max(1, X(x + br.w[i] / 2) - X(x - br.w[i] / 2)), T + ph - BY(br.y[i])]] : []);
    for (const [x, y, w, h] of barRects) occ.rect(x, y, x + w, y + h);
    barRects.top = top; barRects.BY = BY;
  }
  const pubDots = [];
  if (pts) {   // the counts published at the pointer's ε and τ: one dot per pixel row and count (a column of
    // thousands of draws at one true count paints the same few hundred pixels)
    pairs.c.forEach((c, i) => {
      const u = pairs.u[i], px = X(c) - 1.5;
      if (px < L - 3 || px > L + pw + 3) return;
      let last = NaN;
      for (let j = 0; j < pts.ks[i]; j++) {
        const py = Math.round(Y(c + pts.b * u[j]));
        if (py !== last) { pubDots.push(px, py); occ.rect(px - 1, py - 3, px + 4, py + 3); last = py; }
      }
    });
  }
  const mc = spec.points && Math.abs(spec.points.at - v.epsilon) < 1e-9 ? spec.points : null;
  if (mc) {   // Monte Carlo points: valid at the ε they were drawn at only
    for (let j = 0; j < mc.x.length; j++) {
      const p = [X(mc.x[j]), Y(mc.lo[j]), X(mc.x[j]), Y(mc.hi[j])];
      occ.line(p, 2); drawn.push(p); occ.dot(X(mc.x[j]), Y(mc.y[j]), 4.5); dots.push([X(mc.x[j]), Y(mc.y[j]), 2.5]);
    }
  }
  const subst = (t) => (t || "").replace(/\{(\w+)\}/g, (_, k) => fmt(v[k], "tick"));
  const vls = (spec.vlines || []).map((m) => ({ ...m, px: X(resolve(m.x, v)), text: subst(m.label) }))
    .filter((m) => m.px >= L - 0.5 && m.px <= L + pw + 0.5);
  const hls = (spec.hlines || []).map((m) => ({ ...m, y: resolve(m.y, v) })).filter((m) => m.y >= ylo && m.y <= yhi)
    .map((m) => ({ ...m, py: Y(m.y), text: subst(m.label) }));
  for (const m of vls) { const p = [m.px, T, m.px, T + ph]; occ.line(p, 2); drawn.push(p); }
  for (const m of hls) { const p = [L, m.py, L + pw, m.py]; occ.line(p, 2); drawn.push(p); }
  const reads = [];
  for (const r of spec.readouts || []) {   // a readout of a formula or a sum: text only
    if (r.series === undefined || r.posterior !== undefined || r.success !== undefined) continue;
    const d = data[r.series], j = d.x.indexOf(r.x);
    if (j < 0 || !Number.isFinite(d.y[j])) continue;
    const p = [X(r.x), Y(d.y[j])];
    occ.dot(p[0], p[1], 7); dots.push([...p, 5]);
    reads.push({ p, y: d.y[j], r, color: color(spec.series[r.series], r.series), text: fmt(d.y[j], r.fmt) });
  }
  // the legend inside the plot (a wide chart on a screen): the first free corner, else under the plot
  ctx.font = `${fs.legend}px sans-serif`;
  let below = projector || W < NARROW || spec.legend === "below", legendBox = null;
  const lin = Math.round(fs.legend * 1.3);   // the legend inside the plot: one line per series
  if (!below) {
    const lw = Math.max(...spec.series.map((s) => ctx.measureText(s.name).width)) + 38, lhh = lin * spec.series.length;
    const xs = [L + pw - 4 - lw, L + 4], ys = [T + 4, T + ph - 4 - lhh];
    const order = spec.legend === "top" ? [[0, 0], [1, 0], [0, 1], [1, 1]] : [[0, 1], [1, 1], [0, 0], [1, 0]];
    legendBox = order.map(([i, k]) => [xs[i], ys[k], xs[i] + lw, ys[k] + lhh]).find((b) => occ.free(b)) || null;
    if (legendBox) occ.rect(...legendBox); else below = true;
  }
  const labels = [], notes = [];
  const th2 = fs.legend + 2, gap = 5;
  for (const m of vls) {   // beside the line, from the foot of the plot upwards, right of it then left
    const w = ctx.measureText(m.text).width, cands = [];
    for (let y = T + ph - th2 - 4; y >= T + 2; y -= Math.max(4, th2 / 2)) {
      cands.push([m.px + gap, y, m.px + gap + w, y + th2], [m.px - gap - w, y, m.px - gap, y + th2]);
    }
    place(m, cands, "vline");
  }
  for (const m of hls) {   // above or under the line, from the left end and the right end inwards
    const w = ctx.measureText(m.text).width, cands = [], n = Math.max(2, Math.ceil((pw - w) / 24));
    const xs = linspace(L + 6, L + pw - 6 - w, n), order = [];
    for (let i = 0; i < n; i++) order.push(xs[i % 2 ? n - 1 - (i >> 1) : i >> 1]);
    for (const dy of [gap + 1, gap + th2 / 2]) {
      for (const x of order) cands.push([x, m.py - dy - th2, x + w, m.py - dy], [x, m.py + dy, x + w, m.py + dy + th2]);
    }
    place(m, cands, "hline");
  }
  for (const rd of reads) {   // the value beside its dot
    const w = ctx.measureText(rd.text).width, [x, y] = rd.p, cands = [];
    for (const k of [1, 2, 3]) {
      const o = 4 + k * 4;
      cands.push([x + o, y - o - th2, x + o + w, y - o], [x + o, y + o, x + o + w, y + o + th2],
                 [x - o - w, y - o - th2, x - o, y - o], [x - o - w, y + o, x - o, y + o + th2],
                 [x - w / 2, y - o - th2 - 2, x + w / 2, y - o - 2], [x - w / 2, y + o + 2, x + w / 2, y + o + 2 + th2]);
    }
    place(rd, cands, "readout");
  }
  function place(m, cands, kind) {
    const box = cands.find((b) => b[0] >= L + 2 && b[2] <= L + pw - 2 && b[1] >= T + 2 && b[3] <= T + ph - 2
                                  && occ.free(b));
    if (box) { occ.rect(...box); labels.push({ text: m.text, box, kind, color: m.color }); }
    else if (kind !== "readout") notes.push(m);
  }
  const legendItems = below ? [...spec.series.map((s, i) => ({ name: s.name, color: color(s, i), marker: s.marker,
                                                                symbol: s.symbol, line: s.line, open: isOpen(s, 0),
                                                                width: s.width, dash: s.dash })),
                               ...notes.map((m) => ({ name: m.text, color: m.color || "#888", width: 1.5,
                                                      dash: [3, 4] }))] : [];
  const entries = legendItems.map((s) => wrapWords(ctx, s.name, W - 8 - 40));
  const LH = below ? 6 + lh * entries.reduce((n, e) => n + e.length, 0) + 6 : 0;
  const H = T + ph + B + LH;
  if (canvas.width !== Math.round(W * dpr) || canvas.height !== Math.round(H * dpr)) {
    canvas.width = Math.round(W * dpr); canvas.height = Math.round(H * dpr);
    canvas.style.width = W + "px"; canvas.style.height = H + "px";
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  }
  ctx.clearRect(0, 0, W, H);
  const r1 = (a) => a.map((q) => Math.round(q * 10) / 10);
  c.layout = { projector: !!projector, font: { ...fs }, title, lines, titleWidth: titleW, titleLeft: tx, width: W,
               height: H, legend: below ? "below" : "inside", plot, ylabel: { lines: ylines, width: ylabelW },
               labels: labels.map((l) => ({ text: l.text, kind: l.kind, box: r1(l.box) })),
               legendBox: legendBox && r1(legendBox), notes: notes.map((m) => m.text),
               curves: drawn.map(r1), dots: dots.map(r1) };
  c.hits = hits;
  ctx.font = `${fs.tick}px sans-serif`; ctx.fillStyle = fg; ctx.strokeStyle = grid; ctx.lineWidth = 1;
  ctx.textAlign = "right"; ctx.textBaseline = "middle";
  for (const v of yt) {
    ctx.beginPath(); ctx.moveTo(L, Y(v)); ctx.lineTo(L + pw, Y(v)); ctx.stroke();
    ctx.fillText(ytext(v), L - 6, Y(v));
  }
  ctx.textAlign = "center"; ctx.textBaseline = "top";
  for (const v of xTicks(pw)) {
    ctx.beginPath(); ctx.moveTo(X(v), T); ctx.lineTo(X(v), T + ph); ctx.stroke();
    ctx.fillText(xTickText(v), X(v), T + ph + 5);
  }
  ctx.font = `${fs.label}px sans-serif`;
  ctx.fillText(spec.xlabel || "", L + pw / 2, T + ph + fs.tick + 14);
  ylines.forEach((l, i) => {
    ctx.save(); ctx.translate(4 + i * ylh, T + ph / 2); ctx.rotate(-Math.PI / 2); ctx.textBaseline = "top";
    ctx.fillText(l, 0, 0);
    ctx.restore();
  });
  ctx.font = `bold ${fs.title}px sans-serif`; ctx.textAlign = "left"; ctx.textBaseline = "top";
  lines.forEach((l, i) => ctx.fillText(l, tx, 8 + i * th));
  ctx.save(); ctx.beginPath(); ctx.rect(L, T, pw, ph); ctx.clip();
  if (spec.bars) {
    ctx.fillStyle = "#9db4d3";
    for (const [x, y, w, h] of barRects) ctx.fillRect(x, y, w, h);
    ctx.restore(); ctx.save();
    ctx.fillStyle = fg; ctx.textAlign = "left"; ctx.textBaseline = "middle"; ctx.font = `${fs.tick}px sans-serif`;
    for (let p = 0; p <= Math.floor(barRects.top); p++) {
      ctx.fillText(fmt(Math.pow(10, p), "tick"), L + pw + 4, barRects.BY(Math.pow(10, p)));
    }
    ctx.beginPath(); ctx.rect(L, T, pw, ph); ctx.clip();
  }
  ctx.setLineDash([4, 4]);
  for (const m of vls) {
    ctx.strokeStyle = m.color || "#888"; ctx.beginPath(); ctx.moveTo(m.px, T); ctx.lineTo(m.px, T + ph); ctx.stroke();
  }
  ctx.setLineDash([2, 4]);
  for (const m of hls) {
    ctx.strokeStyle = m.color || "#d95f02"; ctx.beginPath(); ctx.moveTo(L, m.py); ctx.lineTo(L + pw, m.py); ctx.stroke();
  }
  ctx.setLineDash([]);
  if (pts) {
    ctx.fillStyle = "rgba(31, 119, 180, 0.55)";
    for (let k = 0; k < pubDots.length; k += 2) ctx.fillRect(pubDots[k], pubDots[k + 1] - 1.5, 3, 3);
  }
  curves.forEach((parts, i) => {   // areas under a curve in one colour (area), to zero
    const s = spec.series[i];
    if (!s.area) return;
    const ybase = Y(Math.max(ylo, 0));
    ctx.fillStyle = s.area;
    for (const p of parts) {
      ctx.beginPath(); ctx.moveTo(p[0], ybase);
      for (let k = 0; k < p.length; k += 2) ctx.lineTo(p[k], p[k + 1]);
      ctx.lineTo(p[p.length - 2], ybase); ctx.closePath(); ctx.fill();
    }
  });
  data.forEach((d, i) => {   // areas under a curve, split at the threshold: suppressed (grey) and published
    const s = spec.series[i];
    if (!s.fill) return;
    const xt = Math.min(Math.max(X(v.threshold), L), L + pw), ybase = Y(Math.max(ylo, 0));
    for (const [x0, x1, fill] of [[L, xt, "rgba(120, 120, 120, 0.35)"], [xt, L + pw, s.fill]]) {
      ctx.save(); ctx.beginPath(); ctx.rect(x0, T, x1 - x0, ph); ctx.clip(); ctx.fillStyle = fill;
      ctx.beginPath(); ctx.moveTo(X(d.x[0]), ybase);
      for (let j = 0; j < d.x.length; j++) if (Number.isFinite(d.y[j])) ctx.lineTo(X(d.x[j]), Y(d.y[j]));
      ctx.lineTo(X(d.x[d.x.length - 1]), ybase); ctx.closePath(); ctx.fill(); ctx.restore();
    }
  });
  curves.forEach((parts, i) => {
    const s = spec.series[i];
    ctx.strokeStyle = color(s, i); ctx.lineWidth = s.width || 2; ctx.setLineDash(s.dash || []);
    ctx.beginPath();
    for (const p of parts) { ctx.moveTo(p[0], p[1]); for (let k = 2; k < p.length; k += 2) ctx.lineTo(p[k], p[k + 1]); }
    ctx.stroke();
    ctx.setLineDash([]);
    if (s.marker) {   // points (e.g. one per known pair), over their line if they have one
      const d = data[i];
      for (let j = 0; j < d.x.length; j++) {
        if (!Number.isFinite(d.y[j])) continue;
        mark(ctx, X(d.x[j]) + (s.offset || 0), Y(d.y[j]), s.marker, s.symbol, isOpen(s, j), color(s, i));
      }
    }
  });
  ctx.setLineDash([]);
  if (mc) {
    ctx.strokeStyle = ctx.fillStyle = "#9467bd"; ctx.lineWidth = 1;
    for (let j = 0; j < mc.x.length; j++) {
      ctx.beginPath(); ctx.moveTo(X(mc.x[j]), Y(mc.lo[j])); ctx.lineTo(X(mc.x[j]), Y(mc.hi[j])); ctx.stroke();
      ctx.beginPath(); ctx.arc(X(mc.x[j]), Y(mc.y[j]), 2.5, 0, 2 * Math.PI); ctx.fill();
    }
  }
  ctx.restore();
  for (const rd of reads) {   // a readout's dot whole, also on the plot's edge (its point is inside the plot)
    const [x, y] = rd.p;
    if (x < L - 0.5 || x > L + pw + 0.5 || y < T - 0.5 || y > T + ph + 0.5) continue;
    ctx.fillStyle = rd.color; ctx.beginPath(); ctx.arc(x, y, 5, 0, 2 * Math.PI); ctx.fill();
  }
  ctx.font = `${fs.legend}px sans-serif`; ctx.textAlign = "left"; ctx.textBaseline = "top";
  for (const l of labels) {   // the labels where nothing is drawn (each in the colour of its line; values in the text's)
    ctx.fillStyle = l.kind === "readout" ? fg : l.color || (l.kind === "hline" ? "#d95f02" : "#888");
    ctx.fillText(l.text, l.box[0], l.box[1] + 1);
  }
  if (pts) data.published = pts;
  ctx.textBaseline = "middle";
  if (below) {   // under the plot, one entry a line (wrapped at spaces), where large type covers no curve
    let y = T + ph + B + 6 + lh / 2;
    legendItems.forEach((s, i) => {
      ctx.textAlign = "left"; ctx.fillStyle = fg;
      entries[i].forEach((l, j) => ctx.fillText(l, 40, y + j * lh));
      if (!s.marker || s.line) {
        ctx.strokeStyle = s.color; ctx.lineWidth = s.width || 2; ctx.setLineDash(s.dash || []);
        ctx.beginPath(); ctx.moveTo(6, y); ctx.lineTo(32, y); ctx.stroke(); ctx.setLineDash([]);
      }
      if (s.marker) mark(ctx, 19, y, s.marker, s.symbol, s.open, s.color);
      y += lh * entries[i].length;
    });
    ctx.setLineDash([]);
    return data;
  }
  // the legend inside the plot, in the free corner found above, one line per series
  ctx.textAlign = "right";
  spec.series.forEach((s, i) => {
    const y = legendBox[1] + lin / 2 + lin * i, x = legendBox[2] - 4;
    ctx.fillStyle = fg; ctx.fillText(s.name, x - 30, y);
    if (!s.marker || s.line) {
      ctx.strokeStyle = color(s, i); ctx.lineWidth = s.width || 2;
      ctx.setLineDash(s.dash || []); ctx.beginPath(); ctx.moveTo(x - 24, y); ctx.lineTo(x, y); ctx.stroke();
      ctx.setLineDash([]);
    }
    if (s.marker) mark(ctx, x - 12, y, s.marker, s.symbol, isOpen(s, 0), color(s, i));
  });
  ctx.setLineDash([]);
  return data;
}

function occupancy(box, cell) {
  // A grid of cell×cell px over the plot box: 1 where something is drawn (a curve with its half width and a
  // margin, a dot, a bar, a placed text).
  const [x0, y0, x1, y1] = box, nx = Math.ceil((x1 - x0) / cell) + 1, ny = Math.ceil((y1 - y0) / cell) + 1;
  const g = new Uint8Array(nx * ny);
  const ix = (x) => Math.floor((x - x0) / cell), iy = (y) => Math.floor((y - y0) / cell);
  const rect = (a, b, c, d) => {
    const i0 = Math.max(0, ix(Math.min(a, c))), i1 = Math.min(nx - 1, ix(Math.max(a, c)));
    const j0 = Math.max(0, iy(Math.min(b, d))), j1 = Math.min(ny - 1, iy(Math.max(b, d)));
    for (let j = j0; j <= j1; j++) for (let i = i0; i <= i1; i++) g[j * nx + i] = 1;
  };
  const dot = (x, y, r) => rect(x - r, y - r, x + r, y + r);
  return {
    rect, dot,
    line(p, r) {   // a polyline [x0, y0, x1, y1, …], sampled every half cell
      if (p.length === 2) { dot(p[0], p[1], r); return; }
      for (let k = 2; k < p.length; k += 2) {
        const ax = p[k - 2], ay = p[k - 1], bx = p[k], by = p[k + 1];
        const n = Math.max(1, Math.ceil(Math.hypot(bx - ax, by - ay) / (cell / 2)));
        for (let s = 0; s <= n; s++) dot(ax + (bx - ax) * s / n, ay + (by - ay) * s / n, r);
      }
    },
    free([a, b, c, d]) {
      const i0 = Math.max(0, ix(a)), i1 = Math.min(nx - 1, ix(c)), j0 = Math.max(0, iy(b)), j1 = Math.min(ny - 1, iy(d));
      for (let j = j0; j <= j1; j++) for (let i = i0; i <= i1; i++) if (g[j * nx + i]) return false;
      return true;
    },
  };
}

function withTables(data) {   // the spec with the carrier's tables in place of their names, or null
  const store = window.__odliveData, get = (r) => (r && r.$ref !== undefined ? (store && store.get(r.$ref)) : r);
  const pairs = get(data.pairs);
  if (data.pairs && !pairs) return null;
  const charts = [];
  for (const c of data.charts) {
    const series = [];
    for (const s of c.series || []) {
      if (!s.table || s.table.$ref === undefined) { series.push(s); continue; }
      const table = get(s.table);
      if (!table) return null;
      series.push({ ...s, table });
    }
    charts.push(c.series ? { ...c, series } : c);
  }
  return { ...data, pairs: pairs || null, charts };
}

// This module is the code of the tables' element (odlab_live_data, mounted before the curves): it keeps the
// tables by name and hands the page this entry; the curves' element carries only a stub (stub.js) that calls it.
// Both are the same on every release of the slider, so Streamlit's message cache sends a reference, not them again.
const KEEP = 64;   // tables kept by name: a few pages' worth (each page holds 2-12)

export default function (component) {
  const store = (window.__odliveData = window.__odliveData || new Map());
  const text = (component.data && component.data.blobs) || "{}";   // the tables as one JSON text
  const el = component.parentElement;
  // parsed once per content, not on every render of the element (unless its tables have left the store since)
  if (!el || el.__odliveText !== text || !(el.__odliveNames || []).every((n) => store.has(n))) {
    const blobs = typeof text === "string" ? JSON.parse(text) : text;
    for (const [name, value] of Object.entries(blobs)) {
      store.delete(name); store.set(name, value);   // most recent last
    }
    if (el) { el.__odliveText = text; el.__odliveNames = Object.keys(blobs); }
  }
  while (store.size > KEEP) store.delete(store.keys().next().value);
  // it takes no room in the page: Streamlit's element container (and the gap it leaves) is hidden
  const box = el && el.closest && el.closest("[data-testid=stElementContainer]");
  if (box) box.style.display = "none";
  window.__odliveCode = entry;
  window.dispatchEvent(new CustomEvent("odlive-data"));
}

function entry(component) {   // the curves' element (stub.js): false while its tables have not arrived
  const full = withTables(component.data);
  if (!full) return false;
  render(component, full);
  return true;
}

function render(component, data) {
  const { parentElement, setStateValue } = component;
  document.body.classList.remove("odlab-stale");   // a rerun drew the cards at the slider's value
  let st = parentElement.__odlive;
  if (!st) {
    const root = document.createElement("div");
    root.className = "odlive";
    root.innerHTML = '<div class="odlive-controls"></div><div class="odlive-readout"></div>' +
      '<div class="odlive-charts"></div>';
    parentElement.appendChild(root);
    st = parentElement.__odlive = { root, charts: [], inputs: {}, values: {}, dragging: false, pending: false,
                                    texts: new Map() };
    // sizes are read here, when they change, never while painting (a read after the frame's text writes forced
    // a layout of the whole page on every frame)
    st.resize = new ResizeObserver((entries) => {
      for (const e of entries) { const c = st.charts.find((x) => x.box === e.target); if (c) c.width = e.contentRect.width; }
      paint(st);
    });
    const follow = (ev) => {   // a follower: no slider of its own, the values of its leader's
      if (!st.root.isConnected) { window.removeEventListener("odlive", follow); return; }
      if (!st.spec.follow || ev.detail.page !== st.spec.follow) return;
      Object.assign(st.values, ev.detail.settings);
      if (!st.pending) { st.pending = true; requestAnimationFrame(() => { st.pending = false; paint(st); }); }
    };
    window.addEventListener("odlive", follow);
    st.unfollow = () => window.removeEventListener("odlive", follow);
  }
  st.setStateValue = setStateValue;
  st.spec = data;
  st.root.dataset.page = data.page;
  st.root.classList.toggle("odlive-projector", !!data.projector);
  const names = data.controls.map((c) => c.name).join(",");
  if (st.names !== names) {   // the controls (one slider per setting the page holds live)
    st.names = names;
    const box = st.root.querySelector(".odlive-controls");
    box.innerHTML = ""; st.inputs = {};
    for (const c of data.controls) {
      const row = document.createElement("div");
      row.className = "odlive-control"; row.dataset.name = c.name;
      row.innerHTML = '<label class="odlive-label"></label><input class="odlive-range" type="range">' +
        '<output class="odlive-out"></output>';
      box.appendChild(row);
      const input = row.querySelector("input");
      st.inputs[c.name] = input;
      const frame = () => { st.pending = false; paint(st); };
      input.addEventListener("input", () => {
        st.values[c.name] = parseFloat(input.value);
        document.body.classList.add("odlab-stale");   // the page's cards show the released value: greyed (layout.py)
        if (!st.pending) { st.pending = true; requestAnimationFrame(frame); }
      });
      input.addEventListener("pointerdown", () => { st.dragging = true; });
      input.addEventListener("pointerup", () => { st.dragging = false; });
      input.addEventListener("change", () => {
        st.dragging = false;
        st.values[c.name] = parseFloat(input.value);
        st.setStateValue(c.name, st.values[c.name]);   // the page's setting: one rerun on release
      });
    }
  }
  if (data.follow) {   // start from the page's settings; the leader's events move them
    const lead = (window.odlive || {})[data.follow];
    Object.assign(st.values, data.fixed || {}, lead && lead.settings ? lead.settings : {});
    for (const [k, val] of Object.entries(data.initial || {})) if (!(lead && lead.settings)) st.values[k] = val;
  }
  for (const c of data.controls) {
    const input = st.inputs[c.name], row = input.parentElement;
    input.min = c.min; input.max = c.max; input.step = c.step;
    input.setAttribute("aria-label", c.label);
    row.querySelector(".odlive-label").textContent = c.label;
    if (!st.dragging) { st.values[c.name] = c.value; input.value = c.value; }
  }
  const box = st.root.querySelector(".odlive-charts");
  if (st.charts.length !== data.charts.length) {
    box.innerHTML = "";
    st.charts = data.charts.map(() => {
      const el = document.createElement("div"); el.className = "odlive-chart";
      const canvas = document.createElement("canvas"); el.appendChild(canvas); box.appendChild(el);
      st.resize.observe(el);
      const c = { box: el, canvas };
      canvas.addEventListener("pointermove", (ev) => hover(c, ev));
      canvas.addEventListener("pointerleave", () => { if (c.tip) c.tip.hidden = true; });
      return c;
    });
  }
  // in projector mode charts beside each other stack, each keeping the content's width (as the plotly charts do)
  box.style.gridTemplateColumns = `repeat(${data.projector ? 1 : data.columns || 1}, minmax(0, 1fr))`;
  // the theme, read once per render from the server (not per frame: getComputedStyle forces a style recalculation)
  st.dark = !!document.body && getComputedStyle(document.body).color === "rgb(250, 250, 250)";
  paint(st);
}

function hover(c, ev) {
  // the text of the point nearest the pointer (within 12 px), in a box beside it; nothing on a chart without any
  if (!c.hits || !c.hits.length) return;
  const r = c.canvas.getBoundingClientRect(), x = ev.clientX - r.left, y = ev.clientY - r.top;
  let best = null, bd = 144;
  for (const h of c.hits) {   // a point, or a step (h[3]: its half width)
    const d = Math.max(0, Math.abs(h[0] - x) - (h[3] || 0)) ** 2 + (h[1] - y) ** 2;
    if (d <= bd) { bd = d; best = h; }
  }
  if (!c.tip) { c.tip = document.createElement("div"); c.tip.className = "odlive-tip"; c.box.appendChild(c.tip); }
  if (!best) { c.tip.hidden = true; return; }
  c.tip.textContent = best[2]; c.tip.hidden = false;
  const w = c.tip.offsetWidth, left = best[0] + 12 + w > r.width ? best[0] - 12 - w : best[0] + 12;
  c.tip.style.left = Math.max(0, left) + "px"; c.tip.style.top = Math.max(0, best[1] - 28) + "px";
}

function setText(st, el, text) {   // write only what changed (each write invalidates the page's layout)
  if (st.texts.get(el) !== text) { st.texts.set(el, text); el.textContent = text; }
}

function setReadout(st, el, reads) {
  // One item a reading ("label value"): items wrap between them, an item's text at its spaces (never inside a
  // word), a value keeps to its label and "n = 70" to itself.
  const key = reads.join("\n");
  if (st.texts.get(el) === key) return;
  st.texts.set(el, key);
  el.replaceChildren(...reads.map((r) => {
    const span = document.createElement("span");
    span.className = "odlive-read";
    span.textContent = r.replace(/ (=|≥|≤) /g, "\u00a0$1\u00a0");
    return span;
  }));
}

function paint(st) {
  const t0 = performance.now();
  const spec = st.spec, v = { ...(spec.fixed || {}), ...st.values };
  if (spec.fit) {   // the per-person threshold fitted to the noise: odcore.privacy.accounting.default_user_threshold
    v.threshold = Math.ceil(Math.max(1, 1 - spec.fit.m / v.epsilon * spec.fit.log2d) - 1e-9);
  }
  const dark = st.dark;
  for (const c of spec.controls) {
    setText(st, st.inputs[c.name].parentElement.querySelector(".odlive-out"), fmt(v[c.name], c.step < 1 ? undefined : "tick"));
  }
  const values = {}, xs = {}, layout = {}, reads = [];
  spec.charts.forEach((c, i) => {
    const d = drawChart(st.charts[i], c, v, dark, spec.pairs, spec.projector);
    layout[c.id] = st.charts[i].layout;
    values[c.id] = Object.fromEntries(c.series.map((s, j) => [s.key || s.name, d[j].y]));
    for (const s of c.series) if (s.args && s.args.counts) values[c.id][(s.key || s.name) + "#counts"] = s.args.counts;
    xs[c.id] = Object.fromEntries(c.series.map((s, j) => [s.key || s.name, d[j].x]));
    for (const r of c.readouts || []) {
      let y;
      if (r.formula) {   // a closed form at a setting (e.g. the release probability of the true count)
        y = FORMULAS[r.formula](0, v, r.args || {});
        values[c.id][r.key || r.formula] = y;
      } else if (r.sum !== undefined) {   // the sum of a series (e.g. pairs expected published)
        y = d[r.sum].y.reduce((a, b) => a + b, 0);
        values[c.id][r.key || "sum"] = y;
      } else if (r.at) {   // the series (against a setting) read at the pointer's value
        const xx = d[r.series].x, yy = d[r.series].y, t = v[r.at];
        let j = 1;
        while (j < xx.length - 1 && xx[j] < t) j++;
        const w = Math.min(1, Math.max(0, (t - xx[j - 1]) / (xx[j] - xx[j - 1])));
        y = yy[j - 1] * (1 - w) + yy[j] * w;
        values[c.id][(c.series[r.series].key || "") + "@" + r.at] = y;
      } else {
        const j = d[r.series].x.indexOf(r.x);
        if (j < 0) continue;
        y = d[r.series].y[j];
      }
      const read = r.success !== undefined ? successBound(y, r.success.delta, r.success.prior)
        : r.posterior !== undefined ? posterior(y, r.posterior) : y;
      const text = fmt(read, r.fmt).replace(/ /g, "\u00a0");
      if (r.join && reads.length) reads[reads.length - 1] += ` ${r.join} ${text}`;   // "between a – b"
      else reads.push(`${r.label}:\u00a0${text}`);   // a value never starts a line
    }
    if (d.published) {
      values[c.id].published = d.published.n;
      reads.push(`pairs published:\u00a0${d.published.capped ? "≥\u00a0" : ""}${d.published.n.toLocaleString("en")}`);
    }
  });
  if (spec.pairs) {
    values.expected = expected(spec.pairs, v);
    reads.push(`expected published:\u00a0${values.expected.toFixed(1)}`);
  }
  setReadout(st, st.root.querySelector(".odlive-readout"), reads);
  if (spec.controls.length) {   // components of the same page that follow these sliders redraw with them
    window.dispatchEvent(new CustomEvent("odlive", { detail: { page: spec.page, settings: { ...st.values } } }));
  }
  // For the tests and the browser benchmark: the values drawn, at which settings, and when each frame was painted.
  const g = (window.odlive = window.odlive || {});
  const rec = (g[spec.page] = g[spec.page] || { paints: [], draw: [] });
  rec.settings = { ...v }; rec.values = values; rec.x = xs; rec.layout = layout;
  const t1 = performance.now();
  rec.paints.push(t1); rec.draw.push(t1 - t0);
  if (rec.paints.length > 2000) { rec.paints.splice(0, 1000); rec.draw.splice(0, 1000); }
}
