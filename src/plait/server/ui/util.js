// DOM and formatting helpers shared by every page.  Everything a server or a workflow
// definition supplies goes into the page as text (never as HTML).

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else if (key === "style") el.style.cssText = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

const SVG = "http://www.w3.org/2000/svg";
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export const STATES = ["pending", "queued", "running", "waiting", "completed", "failed",
  "skipped", "upstream_failed", "cancelled"];
export const FINAL_RUN = new Set(["completed", "failed", "cancelled"]);
export const FINAL_STEP = new Set(["completed", "failed", "skipped", "upstream_failed", "cancelled"]);
export const COLORS = {
  pending: "#8895a3", queued: "#4c6ef5", running: "#1c7ed6", waiting: "#e8890c",
  completed: "#2b8a3e", failed: "#d9302c", skipped: "#adb5bd", upstream_failed: "#862e9c",
  cancelled: "#5f6b77",
};
// node fills: a light tint of the state colour, so dark text stays readable
export const TINTS = {
  pending: "#ffffff", queued: "#edf2ff", running: "#e7f5ff", waiting: "#fff4e6",
  completed: "#ebfbee", failed: "#fff5f5", skipped: "#f8f9fa", upstream_failed: "#f8f0fc",
  cancelled: "#f1f3f5",
};
// a mark beside the colour, so failed (the step's own error) and upstream_failed (a parent
// failed; the step never ran) differ at a glance, in the graph, the pills and the legend
export const ICONS = { failed: "✕", upstream_failed: "⊘" };

// the legend under a graph: each state's colour (upstream_failed hatched) and its mark
export function legend() {
  return h("div", { class: "legend", "data-testid": "legend" }, STATES.map((st) => h("span", { "data-status": st },
    h("i", { class: `sw sw-${st}` }), ICONS[st] ? h("b", { class: `mark st-mark-${st}` }, ICONS[st]) : null, st.replace("_", " "))));
}

export function pill(status) {
  const st = STATES.includes(status) ? status : "pending";
  return h("span", { class: `pill st-${st}`, "data-status": status }, String(status ?? "?").replace("_", " "));
}

export function parseTime(value) {
  if (value === null || value === undefined) return null;
  if (typeof value === "number") return value * 1000;
  const t = Date.parse(value);
  return Number.isNaN(t) ? null : t;
}

export function fmtTime(value) {
  const t = parseTime(value);
  if (t === null) return "—";
  const d = new Date(t);
  const now = new Date();
  const pad = (n) => String(n).padStart(2, "0");
  const hms = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  if (d.toDateString() === now.toDateString()) return hms;
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${hms}`;
}

export function fmtDuration(seconds) {
  if (seconds === null || seconds === undefined || Number.isNaN(seconds)) return "—";
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 60) return `${seconds.toFixed(seconds < 10 ? 2 : 1)} s`;
  const m = Math.floor(seconds / 60);
  if (m < 60) return `${m}m ${Math.round(seconds % 60)}s`;
  return `${Math.floor(m / 60)}h ${m % 60}m`;
}

// a run's duration: duration_s once it ended, else the time since it was created ("…")
export function runDuration(run) {
  if (run.duration_s !== null && run.duration_s !== undefined) return fmtDuration(run.duration_s);
  const start = parseTime(run.started_at ?? run.created_at);
  if (start === null || FINAL_RUN.has(run.status)) return "—";
  return `${fmtDuration(Math.max(0, (Date.now() - start) / 1000))}…`;
}

export function fmtCount(n) { return Number(n).toLocaleString("en-US"); }

const JSON_CAP = 200_000;
// Pretty JSON with light syntax colouring, built from text nodes (no innerHTML).
export function jsonView(value, { cap = JSON_CAP } = {}) {
  const pre = h("pre", { class: "json" });
  let text = value === undefined ? "undefined" : JSON.stringify(value, null, 2);
  if (text === undefined) text = String(value);
  const render = (all) => {
    pre.textContent = "";
    const shown = all || text.length <= cap ? text : text.slice(0, cap);
    const re = /("(?:\\.|[^"\\])*")(\s*:)?|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)|\b(true|false|null)\b/g;
    let last = 0;
    for (const m of shown.matchAll(re)) {
      if (m.index > last) pre.append(shown.slice(last, m.index));
      const cls = m[1] ? (m[2] ? "j-key" : "j-str") : m[3] ? "j-num" : "j-lit";
      pre.append(h("span", { class: cls }, m[1] || m[3] || m[4]));
      if (m[2]) pre.append(m[2]);
      last = m.index + m[0].length;
    }
    pre.append(shown.slice(last));
    if (!all && text.length > cap) {
      pre.append("\n… ", h("a", { href: "#", onclick: (e) => { e.preventDefault(); render(true); } },
        `show all ${fmtCount(text.length)} characters`));
    }
  };
  render(false);
  return pre;
}

let toastTimer = null;
export function toast(message, bad = false) {
  const el = document.getElementById("toast");
  el.textContent = message;
  el.className = bad ? "toast bad" : "toast";
  el.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { el.hidden = true; }, 4000);
}

export function parseJSONInput(text, what) {
  if (!text.trim()) return {};
  try { return JSON.parse(text); } catch (err) {
    throw new Error(`${what} is not valid JSON: ${err.message}`);
  }
}
