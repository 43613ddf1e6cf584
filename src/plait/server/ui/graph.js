// A workflow definition's step graph as SVG: a layered left-to-right layout (longest path
// from the roots, rows ordered by their parents' rows), edges from depends_on and from a
// condition's then/else.  Map items (`fetch[3]`) are one node with a progress count; a
// definition too big to draw step by step collapses its wide layers into one cluster node
// each, so a 10,000-step graph is a few dozen SVG elements.  The drawing fits its box when
// shown (and when the box is resized, until the user zooms); zoom with the buttons or
// Ctrl+wheel, pan by dragging (graph.el holds the box, the SVG and the buttons).

import { h, s, COLORS, TINTS, ICONS, fmtCount } from "./util.js";

const W = 156, H = 46, COL = 52, ROW = 14, PAD = 18;
export const MAX_NODES = 240;   // above this, wide layers are clustered
const WIDE = 24;                // a layer with more nodes than this becomes a cluster
const BANDS = 40;               // at most this many columns when clustered

export function stepList(definition) {
  const steps = definition && Array.isArray(definition.steps) ? definition.steps : [];
  return steps.filter((st) => st && typeof st.id === "string").map((st) => ({
    id: st.id, type: st.type || "", deps: arr(st.depends_on),
    then: arr(st.then), else: arr(st.else ?? st.else_), raw: st,
  }));
}
const arr = (v) => (Array.isArray(v) ? v.filter((x) => typeof x === "string") : typeof v === "string" ? [v] : []);

// the map step an item belongs to: "fetch[3]" -> "fetch"
export function baseStep(name) {
  const m = /^(.*)\[\d+\]$/.exec(name);
  return m ? m[1] : null;
}

export function aggregate(counts) {
  const n = (k) => counts[k] || 0;
  const total = Object.values(counts).reduce((a, b) => a + b, 0);
  if (!total) return "pending";
  if (n("failed")) return "failed";
  if (n("waiting")) return "waiting";
  if (n("running") || n("queued")) return "running";
  if (n("pending")) return n("completed") ? "running" : "pending";
  if (n("upstream_failed")) return "upstream_failed";
  if (n("cancelled")) return "cancelled";
  if (n("completed")) return "completed";
  return "skipped";
}

function layout(steps) {
  const ids = new Set(steps.map((st) => st.id));
  const parents = new Map(steps.map((st) => [st.id, []]));
  const edges = [];
  for (const st of steps) {
    for (const d of st.deps) if (ids.has(d)) { edges.push({ from: d, to: st.id, kind: "dep" }); parents.get(st.id).push(d); }
    for (const [kind, list] of [["then", st.then], ["else", st.else]]) {
      for (const t of list) if (ids.has(t)) { edges.push({ from: st.id, to: t, kind }); parents.get(t).push(st.id); }
    }
  }
  // longest path layering in topological order (Kahn); a cycle's leftovers go last
  const indeg = new Map(steps.map((st) => [st.id, 0]));
  const children = new Map(steps.map((st) => [st.id, []]));
  for (const e of edges) { indeg.set(e.to, indeg.get(e.to) + 1); children.get(e.from).push(e.to); }
  const layer = new Map();
  const queue = steps.filter((st) => indeg.get(st.id) === 0).map((st) => st.id);
  for (const id of queue) layer.set(id, 0);
  for (let i = 0; i < queue.length; i++) {
    const id = queue[i];
    for (const c of children.get(id)) {
      layer.set(c, Math.max(layer.get(c) ?? 0, layer.get(id) + 1));
      indeg.set(c, indeg.get(c) - 1);
      if (indeg.get(c) === 0) queue.push(c);
    }
  }
  let maxLayer = Math.max(0, ...layer.values());
  for (const st of steps) if (!layer.has(st.id)) layer.set(st.id, ++maxLayer);
  const layers = [];
  for (const st of steps) (layers[layer.get(st.id)] ||= []).push(st.id);
  return { edges, parents, layers: layers.filter(Boolean) };
}

// opts.state(id) -> {status, done, total, counts?} ; opts.onSelect(id or cluster members)
export function renderGraph(definition, opts) {
  const steps = stepList(definition);
  const { edges, parents, layers } = layout(steps);
  const clustered = steps.length > MAX_NODES;
  // representative node of each step: itself, or its layer's cluster
  const rep = new Map();
  const nodes = [];
  // a deep graph is cut into about BANDS bands of consecutive layers, each one cluster
  const band = clustered && layers.length > BANDS ? Math.ceil(layers.length / BANDS) : 1;
  for (let b = 0; b * band < layers.length; b++) {
    const group = layers.slice(b * band, (b + 1) * band);
    const ids = group.flat();
    if (clustered && (band > 1 || ids.length > WIDE)) {
      const key = `layer:${b}`;
      const span = band > 1 ? `layers ${b * band + 1}–${b * band + group.length}` : `layer ${b + 1}`;
      nodes.push({ key, cluster: true, members: ids, layer: b, span });
      for (const id of ids) rep.set(id, key);
    } else {
      for (const id of ids) { nodes.push({ key: id, cluster: false, members: [id], layer: b }); rep.set(id, id); }
    }
  }
  const byKey = new Map(nodes.map((n) => [n.key, n]));
  // rows: order each layer by the mean row of its parents (one barycentre sweep)
  const rowOf = new Map();
  const cols = [];
  for (const n of nodes) (cols[n.layer] ||= []).push(n);
  for (const col of cols.filter(Boolean)) {
    const score = (n) => {
      const ps = n.cluster ? [] : parents.get(n.key).map((p) => rowOf.get(rep.get(p))).filter((r) => r !== undefined);
      return ps.length ? ps.reduce((a, b) => a + b, 0) / ps.length : Infinity;
    };
    const scored = col.map((n, i) => [score(n), i, n]).sort((a, b) => (a[0] - b[0]) || (a[1] - b[1]));
    scored.forEach(([, , n], r) => rowOf.set(n.key, r));
  }
  const maxRows = Math.max(1, ...cols.filter(Boolean).map((c) => c.length));
  const width = PAD * 2 + cols.length * W + (cols.length - 1) * COL;
  const height = PAD * 2 + maxRows * H + (maxRows - 1) * ROW;
  for (const n of nodes) {
    const col = cols[n.layer];
    const offset = ((maxRows - col.length) * (H + ROW)) / 2;   // centre short columns
    n.x = PAD + n.layer * (W + COL);
    n.y = PAD + offset + rowOf.get(n.key) * (H + ROW);
  }
  const svg = s("svg", { class: "graph", viewBox: `0 0 ${width} ${height}`, role: "img",
    preserveAspectRatio: "xMidYMid meet", "aria-label": "workflow graph" });
  svg.append(s("defs", {}, s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7,
    markerHeight: 7, orient: "auto-start-reverse" }, s("path", { d: "M0,0 L10,5 L0,10 z", fill: "#adb5bd" })),
  // upstream_failed nodes are hatched (failed ones are plain red): told apart without colour
  s("pattern", { id: "hatch", width: 8, height: 8, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" },
    s("rect", { width: 8, height: 8, fill: TINTS.upstream_failed }),
    s("line", { x1: 0, y1: 0, x2: 0, y2: 8, stroke: COLORS.upstream_failed, "stroke-width": 3, "stroke-opacity": 0.22 }))));
  const view = viewer(svg, width, height);
  const seen = new Set();
  const edgeLayer = s("g", {});
  for (const e of edges) {
    const a = byKey.get(rep.get(e.from)), b = byKey.get(rep.get(e.to));
    const key = `${a.key}->${b.key}:${e.kind === "dep" ? "" : e.kind}`;
    if (a === b || seen.has(key)) continue;
    seen.add(key);
    const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x - 2, y2 = b.y + H / 2, mx = (x1 + x2) / 2;
    edgeLayer.append(s("path", { class: e.kind === "dep" ? "edge" : "edge cond", d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`,
      "marker-end": "url(#arrow)", "data-edge": `${e.from}->${e.to}` }));
    if (e.kind !== "dep") edgeLayer.append(s("text", { class: "elabel", x: mx, y: (y1 + y2) / 2 - 4, "text-anchor": "middle" }, e.kind));
  }
  svg.append(edgeLayer);
  const parts = new Map();
  for (const n of nodes) {
    const title = s("title", {}, n.cluster ? `${fmtCount(n.members.length)} steps (${n.span})` : n.key);
    const box = s("rect", { class: "box", x: n.x, y: n.y, width: W, height: H, rx: 8 });
    const stripe = s("rect", { x: n.x, y: n.y, width: 5, height: H, rx: 2 });
    const label = n.cluster ? `${fmtCount(n.members.length)} steps` : clip(n.key, 18);
    const name = s("text", { x: n.x + 14, y: n.y + 19 }, label);
    const sub = s("text", { class: "sub", x: n.x + 14, y: n.y + 35 }, "");
    const icon = s("text", { class: "icon", x: n.x + W - 10, y: n.y + 19, "text-anchor": "end" }, "");
    const bar = s("g", {});
    const g = s("g", { class: "node", "data-node": n.key, "data-status": "pending", tabindex: 0,
      onclick: () => !view.dragged() && opts.onSelect && opts.onSelect(n.cluster ? { cluster: n.members } : { step: n.key }) },
    title, box, stripe, name, sub, icon, bar);
    svg.append(g);
    parts.set(n.key, { n, g, box, stripe, sub, icon, bar, type: n.cluster ? "" : (steps.find((st) => st.id === n.key)?.type || "") });
  }
  function update(state) {
    for (const { n, g, box, stripe, sub, icon, bar, type } of parts.values()) {
      let status, text, counts = null;
      if (n.cluster) {
        counts = {};
        for (const id of n.members) { const st = state(id).status; counts[st] = (counts[st] || 0) + 1; }
        status = aggregate(counts);
        text = `${fmtCount(counts.completed || 0)}/${fmtCount(n.members.length)} done`;
      } else {
        const info = state(n.key);
        status = info.status;
        text = type;
        if (info.total) { counts = info.counts; text = `${type} · ${fmtCount(info.done)}/${fmtCount(info.total)}`; }
        if (info.cached) text += " · cached";
      }
      g.setAttribute("data-status", status);
      box.setAttribute("fill", status === "upstream_failed" ? "url(#hatch)" : TINTS[status] || "#fff");
      icon.textContent = ICONS[status] || "";
      icon.style.fill = COLORS[status] || "#ced4da";   // over the stylesheet's text colour
      box.setAttribute("stroke", status === "pending" ? "#ced4da" : COLORS[status]);
      stripe.setAttribute("fill", COLORS[status] || "#ced4da");
      sub.textContent = text;
      bar.textContent = "";
      if (counts) {
        const total = Object.values(counts).reduce((a, b) => a + b, 0) || 1;
        let x = n.x + 14;
        const w = W - 28;
        for (const st of ["completed", "failed", "upstream_failed", "cancelled", "skipped", "running", "waiting", "queued"]) {
          if (!counts[st]) continue;
          const dw = (counts[st] / total) * w;
          bar.append(s("rect", { x, y: n.y + H - 7, width: Math.max(dw, 0.5), height: 3, fill: COLORS[st] }));
          x += dw;
        }
      }
    }
  }
  function select(key) {
    for (const { g } of parts.values()) g.classList.toggle("sel", g.dataset.node === key);
  }
  return { svg, el: view.el, fit: view.fit, update, select, clustered, nodeCount: nodes.length, rep };
}

const MIN_BOX = 150, MAX_BOX = 520;   // px: the box's height follows the drawing's shape
const ZOOM = 1.25;

// The box around the SVG, its zoom buttons, and the viewBox they move.  fit() shows the
// whole drawing (never magnified); zooming or panning stops refitting on resize.
function viewer(svg, width, height) {
  let vb = { x: 0, y: 0, w: width, h: height };
  let auto = true, moved = false, lastWidth = 0;
  const set = () => svg.setAttribute("viewBox", `${vb.x} ${vb.y} ${vb.w} ${vb.h}`);
  const btn = (action, label, title, fn) => h("button", { type: "button", class: "btn ghost small", "data-action": action, title, "aria-label": title, onclick: fn }, label);
  const el = h("div", { class: "graphbox", "data-testid": "graph" }, svg,
    h("div", { class: "zoom" },
      btn("zoom-in", "+", "Zoom in", () => zoom(1 / ZOOM)),
      btn("zoom-out", "−", "Zoom out", () => zoom(ZOOM)),
      btn("zoom-fit", "Fit", "Fit the graph in view", () => fit())));
  function fit() {
    auto = true;
    const bw = el.clientWidth || width;
    el.style.height = `${Math.round(Math.min(MAX_BOX, Math.max(MIN_BOX, height * Math.min(1, bw / width))))}px`;
    const bh = el.clientHeight || height;
    // at most 1:1, centred: a small graph is not blown up
    const scale = Math.min(1, bw / width, bh / height);
    const w = bw / scale, hh = bh / scale;
    vb = { x: (width - w) / 2, y: (height - hh) / 2, w, h: hh };
    set();
  }
  // factor > 1 zooms out; (cx, cy): the point that stays put, in drawing units
  function zoom(factor, cx = vb.x + vb.w / 2, cy = vb.y + vb.h / 2) {
    auto = false;
    const w = Math.min(Math.max(vb.w * factor, 40), Math.max(width, el.clientWidth) * 8);
    const f = w / vb.w;
    vb = { x: cx - (cx - vb.x) * f, y: cy - (cy - vb.y) * f, w, h: vb.h * f };
    set();
  }
  const unitsPerPx = () => Math.max(vb.w / (svg.clientWidth || 1), vb.h / (svg.clientHeight || 1));
  svg.addEventListener("wheel", (e) => {
    if (!e.ctrlKey && !e.metaKey) return;   // a plain wheel scrolls the page
    e.preventDefault();
    const r = svg.getBoundingClientRect(), u = unitsPerPx();
    const cx = vb.x + vb.w / 2 + (e.clientX - r.left - r.width / 2) * u;
    const cy = vb.y + vb.h / 2 + (e.clientY - r.top - r.height / 2) * u;
    zoom(e.deltaY > 0 ? ZOOM : 1 / ZOOM, cx, cy);
  }, { passive: false });
  let drag = null;
  svg.addEventListener("pointerdown", (e) => { if (e.button === 0) { drag = { x: e.clientX, y: e.clientY, vx: vb.x, vy: vb.y }; moved = false; } });
  svg.addEventListener("pointermove", (e) => {
    if (!drag || !(e.buttons & 1)) { drag = null; return; }
    const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (!moved && Math.hypot(dx, dy) < 4) return;
    moved = true;
    auto = false;
    const u = unitsPerPx();
    vb = { ...vb, x: drag.vx - dx * u, y: drag.vy - dy * u };
    set();
  });
  svg.addEventListener("pointerup", () => { drag = null; });
  new ResizeObserver(() => {
    if (el.clientWidth && el.clientWidth !== lastWidth) { lastWidth = el.clientWidth; if (auto) fit(); }
  }).observe(el);
  return { el, fit, dragged: () => moved };
}

function clip(text, n) { return text.length > n ? `${text.slice(0, n - 1)}…` : text; }
