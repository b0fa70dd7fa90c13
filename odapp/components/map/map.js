// The lab's map: a deck description (the pydeck JSON odapp.maps builds: layers, first view, fit box, tooltip)
// drawn with Canvas 2D on a Web Mercator view. It draws only when something changes: new data, a new size
// (ResizeObserver), a drag or a wheel turn (one frame each), the object under the pointer. No animation loop runs
// while nothing moves. Plain JavaScript, no library, nothing fetched. Spec of `data`: odapp/components/map/__init__.py.

const TILE = 512;                       // the world's width in px at zoom 0 (deck.gl's Web Mercator)
const HIGHLIGHT = "rgba(0, 0, 128, 0.5)";   // deck.gl's default highlight colour [0, 0, 128, 128]
const ZOOM_MIN = 1, ZOOM_MAX = 20;
const EXPR_OK = /^[\w\s[\],.+\-*/()]+$/;   // an accessor expression: arithmetic over the row's fields, nothing else

function mercX(lon) { return (lon + 180) / 360 * TILE; }
function mercY(lat) {
  const phi = Math.max(-85.05113, Math.min(85.05113, lat)) * Math.PI / 180;
  return (180 - Math.log(Math.tan(Math.PI / 4 + phi / 2)) * 180 / Math.PI) / 360 * TILE;
}
function lonOf(x) { return x / TILE * 360 - 180; }
function latOf(y) { return Math.atan(Math.exp((180 - y / TILE * 360) * Math.PI / 180)) * 360 / Math.PI - 90; }

// An accessor of a layer property: a constant, "@@=field" or "@@=expression over the row's fields".
function accessor(value, fields) {
  if (typeof value !== "string" || !value.startsWith("@@=")) return () => value;
  const expr = value.slice(3).trim();
  if (/^[A-Za-z_]\w*$/.test(expr)) return (row) => row[expr];
  if (/^'.*'$/.test(expr)) { const s = expr.slice(1, -1); return () => s; }
  if (!EXPR_OK.test(expr)) return () => undefined;
  const names = fields.filter((f) => /^[A-Za-z_]\w*$/.test(f));
  const f = new Function(...names, `return (${expr});`);
  return (row) => f(...names.map((n) => row[n]));
}

function constant(value) {   // a plain property, or a quoted string pydeck sent as "@@='…'"
  if (typeof value === "string" && value.startsWith("@@=")) {
    const e = value.slice(3).trim();
    return /^'[^']*'$/.test(e) ? e.slice(1, -1) : e;
  }
  return value;
}

function rgba(c, fallback) {
  if (!Array.isArray(c)) c = fallback;
  const a = c.length > 3 ? c[3] / 255 : 1;
  return `rgba(${Math.round(c[0])},${Math.round(c[1])},${Math.round(c[2])},${a.toFixed(3)})`;
}

// Each layer turned into what the canvas draws: coordinates in world units (512 px at zoom 0) relative to the
// map's origin (small numbers, so single-precision paths stay exact at street zoom), colours as CSS strings.
function prepare(layer, origin) {
  const type = layer["@@type"], rows = Array.isArray(layer.data) ? layer.data : [];
  const fields = rows.length ? Object.keys(rows[0]) : [];
  const get = (name, fallback) => accessor(layer[name] === undefined ? fallback : layer[name], fields);
  const X = (lon) => mercX(lon) - origin[0], Y = (lat) => mercY(lat) - origin[1];
  const out = { id: layer.id, type, pickable: !!layer.pickable, highlight: !!layer.autoHighlight, rows,
                items: [], drawn: 0 };
  if (type === "PolygonLayer") {
    const poly = get("getPolygon", "@@=polygon"), fill = get("getFillColor", [0, 0, 0, 255]);
    for (const row of rows) {
      let ring = poly(row) || [];
      if (ring.length && Array.isArray(ring[0]) && Array.isArray(ring[0][0])) ring = ring[0];   // outer ring
      const xy = new Float64Array(ring.length * 2);
      let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
      ring.forEach((p, i) => {
        const x = X(p[0]), y = Y(p[1]);
        xy[2 * i] = x; xy[2 * i + 1] = y;
        if (x < x0) x0 = x; if (x > x1) x1 = x; if (y < y0) y0 = y; if (y > y1) y1 = y;
      });
      if (ring.length >= 3) out.items.push({ row, xy, box: [x0, y0, x1, y1], fill: rgba(fill(row), [0, 0, 0, 255]) });
    }
    out.filled = layer.filled !== false;
  } else if (type === "LineLayer") {
    const s = get("getSourcePosition", "@@=sourcePosition"), t = get("getTargetPosition", "@@=targetPosition");
    const color = get("getColor", [0, 0, 0, 255]), width = get("getWidth", 1);
    const wmin = layer.widthMinPixels || 0, wmax = layer.widthMaxPixels || Infinity;
    for (const row of rows) {
      const a = s(row), b = t(row);
      if (!a || !b) continue;
      const w = Math.min(wmax, Math.max(wmin, Number(width(row)) || 1));
      const xy = [X(a[0]), Y(a[1]), X(b[0]), Y(b[1])];
      out.items.push({ row, xy, box: [Math.min(xy[0], xy[2]), Math.min(xy[1], xy[3]), Math.max(xy[0], xy[2]),
                                      Math.max(xy[1], xy[3])], stroke: rgba(color(row), [0, 0, 0, 255]), width: w });
    }
  } else if (type === "ScatterplotLayer") {
    const pos = get("getPosition", "@@=position"), fill = get("getFillColor", [0, 0, 0, 255]);
    const radius = get("getRadius", 1), rmin = layer.radiusMinPixels || 0;
    for (const row of rows) {
      const p = pos(row);
      if (!p) continue;
      // metres to world units at the point's latitude (Web Mercator stretches by 1/cos φ)
      const r = (Number(radius(row)) || 1) / (40075016.686 * Math.cos(p[1] * Math.PI / 180)) * TILE;
      out.items.push({ row, x: X(p[0]), y: Y(p[1]), r, rmin, fill: rgba(fill(row), [0, 0, 0, 255]) });
    }
  } else if (type === "TextLayer") {
    const pos = get("getPosition", "@@=position"), text = get("getText", "@@=text");
    const color = get("getColor", [0, 0, 0, 255]), size = get("getSize", 32);
    out.anchor = constant(layer.getTextAnchor) || "middle";
    out.baseline = constant(layer.getAlignmentBaseline) || "center";
    out.font = constant(layer.fontFamily) || "sans-serif";
    out.weight = layer.fontWeight || 400;
    out.offset = Array.isArray(layer.getPixelOffset) ? layer.getPixelOffset : [0, 0];
    out.outline = layer.outlineWidth ? { width: layer.outlineWidth, color: rgba(layer.outlineColor, [255, 255, 255, 255]) } : null;
    out.collide = !!layer.collisionEnabled || String(layer.id || "").startsWith("place_labels");
    for (const row of rows) {
      const p = pos(row), s = text(row);
      if (!p || s === undefined || s === null || s === "") continue;
      out.items.push({ row, x: X(p[0]), y: Y(p[1]), text: String(s), size: Number(size(row)) || 12,
                       fill: rgba(color(row), [0, 0, 0, 255]) });
    }
  } else if (type === "BitmapLayer") {
    const b = layer.bounds, src = constant(layer.image);
    if (Array.isArray(b) && typeof src === "string" && src.startsWith("data:")) {
      const img = new Image();
      out.items.push({ img, x0: X(b[0]), y1: Y(b[1]), x1: X(b[2]), y0: Y(b[3]) });
      out.pending = img;
      img.src = src;
    }
  }
  return out;
}

function parseDeck(text) {
  const deck = typeof text === "string" ? JSON.parse(text) : text;
  const v = deck.initialViewState || { longitude: 0, latitude: 0, zoom: 1 };
  const origin = [mercX(v.longitude), mercY(v.latitude)];
  const layers = (deck.layers || []).filter((l) => l && l.visible !== false).map((l) => prepare(l, origin));
  return { deck, origin, layers, initial: v, fit: Array.isArray(deck.fit) ? deck.fit : null };
}

// ---- the view: centre (world units, relative to the origin) and zoom

function firstView(st) {
  const m = st.model, W = st.width, H = st.height;
  if (m.fit && W > 0 && H > 0) {
    const [lo0, la0, lo1, la1, pad = 16] = m.fit;
    const x0 = mercX(lo0), x1 = mercX(lo1), y0 = mercY(la1), y1 = mercY(la0);
    const zx = Math.log2(Math.max(W - 2 * pad, 20) / Math.max(x1 - x0, 1e-9));
    const zy = Math.log2(Math.max(H - 2 * pad, 20) / Math.max(y1 - y0, 1e-9));
    return { cx: (x0 + x1) / 2 - m.origin[0], cy: (y0 + y1) / 2 - m.origin[1],
             zoom: Math.max(ZOOM_MIN, Math.min(ZOOM_MAX, Math.min(zx, zy))) };
  }
  return { cx: 0, cy: 0, zoom: m.initial.zoom || 1 };
}

// ---- drawing

function draw(st) {
  st.pending = false;
  // the marks tests wait on: drawn (data-draws), and no draw to come (data-pending: a frame or an image to decode)
  if (st.model.layers.some((L) => L.pending && !L.pending.complete)) st.root.setAttribute("data-pending", "");
  else st.root.removeAttribute("data-pending");
  const t0 = performance.now();
  const { canvas, ctx, width: W, height: H, view } = st;
  const dpr = window.devicePixelRatio || 1;
  if (canvas.width !== Math.round(W * dpr) || canvas.height !== Math.round(H * dpr)) {
    canvas.width = Math.round(W * dpr); canvas.height = Math.round(H * dpr);
    st.over.width = canvas.width; st.over.height = canvas.height;
  }
  ctx.setTransform(1, 0, 0, 1, 0, 0);
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  const k = 2 ** view.zoom, tx = W / 2 - view.cx * k, ty = H / 2 - view.cy * k;
  const world = () => ctx.setTransform(k * dpr, 0, 0, k * dpr, tx * dpr, ty * dpr);
  const screen = () => ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  // the view's box in world units, to skip what lies outside it
  const vx0 = -tx / k, vy0 = -ty / k, vx1 = (W - tx) / k, vy1 = (H - ty) / k;
  const inView = (b) => b[2] >= vx0 && b[0] <= vx1 && b[3] >= vy0 && b[1] <= vy1;
  const counts = {};
  for (const L of st.model.layers) {
    let n = 0;
    if (L.type === "PolygonLayer" && L.filled) {
      world();
      let fill = null;
      for (const it of L.items) {
        if (!inView(it.box)) continue;
        if (it.fill !== fill) { fill = it.fill; ctx.fillStyle = fill; }
        const xy = it.xy;
        ctx.beginPath();
        ctx.moveTo(xy[0], xy[1]);
        for (let i = 2; i < xy.length; i += 2) ctx.lineTo(xy[i], xy[i + 1]);
        ctx.closePath();
        ctx.fill();
        n++;
      }
    } else if (L.type === "LineLayer") {
      let key = null;
      for (const it of L.items) {
        if (!inView(it.box)) continue;
        const k2 = it.stroke + "|" + it.width;
        if (k2 !== key) {
          if (key !== null) { screen(); ctx.stroke(); }
          key = k2; ctx.strokeStyle = it.stroke; ctx.lineWidth = it.width; ctx.lineCap = "round";
          world(); ctx.beginPath();
        }
        ctx.moveTo(it.xy[0], it.xy[1]); ctx.lineTo(it.xy[2], it.xy[3]);   // built in world units,
        n++;
      }
      if (key !== null) { screen(); ctx.stroke(); }                        // stroked in px
    } else if (L.type === "ScatterplotLayer") {
      screen();
      for (const it of L.items) {
        const x = it.x * k + tx, y = it.y * k + ty, r = Math.max(it.r * k, it.rmin);
        if (x + r < 0 || x - r > W || y + r < 0 || y - r > H) continue;
        ctx.fillStyle = it.fill; ctx.beginPath(); ctx.arc(x, y, r, 0, 2 * Math.PI); ctx.fill();
        n++;
      }
    } else if (L.type === "BitmapLayer") {
      world();
      for (const it of L.items) {
        if (it.img.complete && it.img.naturalWidth) {
          ctx.imageSmoothingEnabled = true;
          ctx.drawImage(it.img, it.x0, it.y0, it.x1 - it.x0, it.y1 - it.y0);
          n++;
        }
      }
    } else if (L.type === "TextLayer") {
      screen();
      const placed = [];
      for (const it of L.items) {
        const x = it.x * k + tx + L.offset[0], y = it.y * k + ty + L.offset[1];
        if (x < -200 || x > W + 200 || y < -50 || y > H + 50) continue;
        ctx.font = `${L.weight} ${it.size}px ${L.font}`;
        const w = ctx.measureText(it.text).width, h = it.size;
        const left = L.anchor === "start" ? x : L.anchor === "end" ? x - w : x - w / 2;
        const top = L.baseline === "top" ? y : L.baseline === "bottom" ? y - h : y - h / 2;
        const box = [left - 2, top - 1, left + w + 2, top + h + 1];
        if (L.collide && (box[0] < 0 || box[2] > W || box[1] < 0 || box[3] > H
            || placed.some((b) => box[0] < b[2] && b[0] < box[2] && box[1] < b[3] && b[1] < box[3]))) continue;
        placed.push(box);
        ctx.textAlign = L.anchor === "start" ? "left" : L.anchor === "end" ? "right" : "center";
        ctx.textBaseline = L.baseline === "center" ? "middle" : L.baseline;
        if (L.outline) {
          ctx.lineJoin = "round"; ctx.strokeStyle = L.outline.color; ctx.lineWidth = L.outline.width;
          ctx.strokeText(it.text, x, y);
        }
        ctx.fillStyle = it.fill; ctx.fillText(it.text, x, y);
        n++;
      }
      L.placed = placed;
    }
    L.drawn = n;
    counts[L.id] = n;
  }
  drawHover(st);
  const ms = performance.now() - t0;
  st.record.draws += 1;
  st.record.drawMs.push(Math.round(ms * 10) / 10);
  if (st.record.drawMs.length > 50) st.record.drawMs.shift();
  st.record.drawn = counts;
  st.root.dataset.draws = String(st.record.draws);
  st.record.view = { longitude: lonOf(view.cx + st.model.origin[0]), latitude: latOf(view.cy + st.model.origin[1]),
                     zoom: view.zoom, width: W, height: H };
}

function drawHover(st) {
  const o = st.octx, dpr = window.devicePixelRatio || 1;
  o.setTransform(1, 0, 0, 1, 0, 0);
  o.clearRect(0, 0, st.over.width, st.over.height);
  const h = st.hover;
  if (!h || !h.layer.highlight) return;
  const k = 2 ** st.view.zoom, tx = st.width / 2 - st.view.cx * k, ty = st.height / 2 - st.view.cy * k;
  o.fillStyle = HIGHLIGHT;
  if (h.item.xy && h.layer.type === "PolygonLayer") {
    o.setTransform(k * dpr, 0, 0, k * dpr, tx * dpr, ty * dpr);
    const xy = h.item.xy;
    o.beginPath(); o.moveTo(xy[0], xy[1]);
    for (let i = 2; i < xy.length; i += 2) o.lineTo(xy[i], xy[i + 1]);
    o.closePath(); o.fill();
  }
}

function schedule(st) {   // one frame for a change; nothing when nothing changed
  if (!st.pending) {
    st.pending = true;
    st.root.setAttribute("data-pending", "");
    requestAnimationFrame(() => draw(st));
  }
}

// ---- picking: the top pickable object under a point (px from the canvas's top left)

function pick(st, px, py) {
  const k = 2 ** st.view.zoom;
  const x = st.view.cx + (px - st.width / 2) / k, y = st.view.cy + (py - st.height / 2) / k;
  const layers = st.model.layers;
  for (let li = layers.length - 1; li >= 0; li--) {
    const L = layers[li];
    if (!L.pickable) continue;
    for (let i = L.items.length - 1; i >= 0; i--) {
      const it = L.items[i];
      if (L.type === "PolygonLayer") {
        const b = it.box;
        if (x < b[0] || x > b[2] || y < b[1] || y > b[3]) continue;
        const xy = it.xy, n = xy.length / 2;
        let inside = false;
        for (let a = 0, c = n - 1; a < n; c = a++) {
          const ya = xy[2 * a + 1], yc = xy[2 * c + 1];
          if ((ya > y) !== (yc > y)
              && x < (xy[2 * c] - xy[2 * a]) * (y - ya) / (yc - ya) + xy[2 * a]) inside = !inside;
        }
        if (inside) return { layer: L, item: it };
      } else if (L.type === "LineLayer") {
        const [x0, y0, x1, y1] = it.xy, dx = x1 - x0, dy = y1 - y0, l2 = dx * dx + dy * dy;
        const t = l2 > 0 ? Math.max(0, Math.min(1, ((x - x0) * dx + (y - y0) * dy) / l2)) : 0;
        const d = Math.hypot(x - (x0 + t * dx), y - (y0 + t * dy)) * k;
        if (d <= Math.max(it.width / 2, 3)) return { layer: L, item: it };
      } else if (L.type === "ScatterplotLayer") {
        if (Math.hypot(x - it.x, y - it.y) * k <= Math.max(it.r * k, it.rmin)) return { layer: L, item: it };
      }
    }
  }
  return null;
}

function tipText(template, row) {
  return String(template).replace(/\{(\w+)\}/g, (_, f) => (row[f] === undefined || row[f] === null ? "" : String(row[f])));
}

function hoverAt(st, px, py) {
  const h = px === null ? null : pick(st, px, py);
  const same = (h && st.hover && h.item === st.hover.item) || (!h && !st.hover);
  st.hover = h;
  const tip = st.tip, t = st.tooltip;
  const text = h && t && t.text ? tipText(t.text, h.item.row) : "";
  if (text) {
    if (tip.textContent !== text) tip.textContent = text;
    tip.hidden = false;
    // centred under the pointer (its style's translate), kept inside the map left and right
    const half = tip.offsetWidth / 2;
    tip.style.left = `${Math.max(half, Math.min(st.width - half, px))}px`; tip.style.top = `${py}px`;
  } else if (!tip.hidden) tip.hidden = true;
  st.record.tip = text;
  if (!same) drawHover(st);   // the highlight on its own canvas: the map itself is not drawn again
}

// ---- the element

function setup(el) {
  const root = document.createElement("div");
  root.className = "odmap";
  root.innerHTML = '<canvas class="odmap-base"></canvas><canvas class="odmap-over"></canvas>' +
    '<div class="odmap-tip" hidden></div>';
  el.appendChild(root);
  const canvas = root.querySelector(".odmap-base"), over = root.querySelector(".odmap-over");
  const st = { root, canvas, over, ctx: canvas.getContext("2d"), octx: over.getContext("2d"),
               tip: root.querySelector(".odmap-tip"), width: 0, height: 0, view: null, moved: false,
               pending: false, hover: null, drag: null,
               record: { draws: 0, drawMs: [], drawn: {}, view: null, tip: "" } };
  st.resize = new ResizeObserver((entries) => {
    const r = entries[entries.length - 1].contentRect;
    if (r.width === st.width && r.height === st.height) return;
    st.width = r.width; st.height = r.height;
    if (st.model && (!st.moved || !st.view)) st.view = firstView(st);   // fitted at the element's real size
    if (st.model && st.width > 0) schedule(st);
  });
  st.resize.observe(root);
  const local = (ev) => { const r = canvas.getBoundingClientRect(); return [ev.clientX - r.left, ev.clientY - r.top]; };
  over.addEventListener("pointerdown", (ev) => {
    if (ev.button !== 0 || !st.view) return;
    over.setPointerCapture(ev.pointerId);
    st.drag = { x: ev.clientX, y: ev.clientY, cx: st.view.cx, cy: st.view.cy };
    root.classList.add("odmap-dragging");
    hoverAt(st, null, null);
  });
  over.addEventListener("pointermove", (ev) => {
    if (!st.view) return;
    if (st.drag) {
      const k = 2 ** st.view.zoom;
      st.view = { ...st.view, cx: st.drag.cx - (ev.clientX - st.drag.x) / k, cy: st.drag.cy - (ev.clientY - st.drag.y) / k };
      st.moved = true;
      schedule(st);
      return;
    }
    const [x, y] = local(ev);
    hoverAt(st, x, y);
  });
  const end = (ev) => {
    if (!st.drag) return;
    st.drag = null;
    root.classList.remove("odmap-dragging");
    if (over.hasPointerCapture(ev.pointerId)) over.releasePointerCapture(ev.pointerId);
  };
  over.addEventListener("pointerup", end);
  over.addEventListener("pointercancel", end);
  over.addEventListener("pointerleave", () => { if (!st.drag) hoverAt(st, null, null); });
  const zoomAt = (x, y, dz) => {
    const v = st.view, k0 = 2 ** v.zoom;
    const zoom = Math.max(ZOOM_MIN, Math.min(ZOOM_MAX, v.zoom + dz)), k1 = 2 ** zoom;
    // the point under the pointer stays under it
    const wx = v.cx + (x - st.width / 2) / k0, wy = v.cy + (y - st.height / 2) / k0;
    st.view = { cx: wx - (x - st.width / 2) / k1, cy: wy - (y - st.height / 2) / k1, zoom };
    st.moved = true;
    hoverAt(st, null, null);
    schedule(st);
  };
  over.addEventListener("wheel", (ev) => {
    if (!st.view) return;
    ev.preventDefault();
    const [x, y] = local(ev);
    const d = ev.deltaMode === 1 ? ev.deltaY * 33 : ev.deltaMode === 2 ? ev.deltaY * 400 : ev.deltaY;
    zoomAt(x, y, Math.max(-1, Math.min(1, -d / 200)));
  }, { passive: false });
  over.addEventListener("dblclick", (ev) => { if (st.view) { const [x, y] = local(ev); zoomAt(x, y, ev.shiftKey ? -1 : 1); } });
  return st;
}

export default function (component) {
  const { parentElement: el, data } = component;
  if (!el || !data) return;
  let st = el.__odmap;
  if (!st) st = el.__odmap = setup(el);
  const registry = (window.odmap = window.odmap || {});
  registry[data.id || component.key] = st.record;
  st.root.style.height = `${data.height || 460}px`;
  st.tooltip = data.tooltip || null;
  if (data.tooltip && data.tooltip.style && st.tipStyle !== JSON.stringify(data.tooltip.style)) {
    st.tipStyle = JSON.stringify(data.tooltip.style);
    for (const [k, v] of Object.entries(data.tooltip.style)) st.tip.style[k] = v;
  }
  if (st.text !== data.deck) {   // new data: parsed and laid out once
    st.text = data.deck;
    const old = st.model;
    st.model = parseDeck(data.deck);
    const same = old && JSON.stringify([old.initial, old.fit]) === JSON.stringify([st.model.initial, st.model.fit])
      && old.origin[0] === st.model.origin[0] && old.origin[1] === st.model.origin[1];
    if (!same || !st.view) { st.view = null; st.moved = false; }
    st.hover = null; st.tip.hidden = true;
    st.record.layers = Object.fromEntries(st.model.layers.map((L) => [L.id, L.items.length]));
    for (const L of st.model.layers) if (L.pending) L.pending.onload = () => schedule(st);   // the image, once decoded
  }
  if (st.width > 0 && st.height > 0) {
    if (!st.view) st.view = firstView(st);
    schedule(st);
  }
  st.record.rows = (id) => {   // the rows a layer was given (for tests)
    const L = st.model.layers.find((x) => x.id === id);
    return L ? L.rows : null;
  };
  st.record.project = (lon, lat) => {   // px within the map of a point (for tests and the benchmark)
    const k = 2 ** st.view.zoom;
    return [(mercX(lon) - st.model.origin[0] - st.view.cx) * k + st.width / 2,
            (mercY(lat) - st.model.origin[1] - st.view.cy) * k + st.height / 2];
  };
}
