// The Gantt chart: one row per step that started, a bar per attempt (or the step's span
// when attempts are not listed), on one time axis; rows are virtualized.  A long stretch
// where nothing but waits went on (an approval waiting for a person) is folded: drawn as a
// short broken band with its duration written, so the work around it stays readable.

import { h, COLORS, parseTime, fmtDuration } from "./util.js";
import { virtualList } from "./vlist.js";

const SPAN = 94;          // percent of the track the run's span covers (room for the last label)
const FOLD_SHARE = 0.2;   // a wait-only stretch longer than this share of the run is folded...
const FOLD_MIN_MS = 1000; // ...when it also lasts at least this long
const FOLD_PCT = 9;       // percent of the track a fold takes (less when there are many)
const FINISHED = (st) => st === "completed" || st === "failed" || st === "cancelled";

// waits(id): true when the step's attempts are waits as a whole (an approval step)
export function gantt({ onSelect }) {
  const axis = h("div", { class: "axis" });
  let scale = { at: () => 0, folds: [] };
  const list = virtualList({
    rowHeight: 28, maxHeight: 380,
    renderRow(row, el) {
      el.title = `${row.id}: ${row.status} · ${fmtDuration(row.dur)}`;
      const track = h("div", { class: "track" });
      for (const f of scale.folds) track.append(h("div", { class: "gap", style: `left:${f.x}%;width:${f.w}%` }));
      for (const seg of row.segs) track.append(bar(row.id, seg));
      el.append(h("span", { class: "glabel" }, row.id), track);
      el.addEventListener("click", () => onSelect(row.id));
    },
  });
  function bar(id, seg) {
    const left = scale.at(seg.start), right = scale.at(seg.end);
    const folded = seg.wait && scale.folds.some((f) => f.a < seg.end && f.b > seg.start);
    const cls = `bar${seg.wait ? " wait" : ""}${folded ? " folded" : ""}`;
    const el = h("div", { class: cls, "data-step": id, "data-status": seg.status,
      style: `left:${left}%;width:${Math.max(right - left, 0.15)}%;background-color:${COLORS[seg.status] || COLORS.pending}` });
    if (folded) {
      const took = fmtDuration((seg.end - seg.start) / 1000);
      el.title = `${id} waited ${took}`;
      el.append(h("span", { class: "dur" }, took));
    }
    return el;
  }
  const el = h("div", { class: "gantt", "data-testid": "gantt" }, axis, list.el);
  function update(run, waits = () => false) {
    const rows = rowsOf(run, waits, Date.now());
    const t0 = rows.length ? Math.min(...rows.map((r) => r.start)) : Date.now();
    const t1 = rows.length ? Math.max(...rows.map((r) => r.end)) : t0;
    scale = timeScale(t0, Math.max(t1, t0 + 1), foldable(rows, t0, Math.max(t1, t0 + 1)));
    drawAxis(t0);
    list.setItems(rows);
    el.dataset.folds = String(scale.folds.length);
    return rows.length;
  }
  function drawAxis(t0) {
    axis.textContent = "";
    const step = niceStep(scale.live / 1000 / 6);
    for (const [a, b] of scale.pieces) {
      for (let t = Math.ceil((a - t0) / 1000 / step - 1e-9) * step; t0 + t * 1000 <= b + 1e-6; t += step) {
        const x = scale.at(t0 + t * 1000);
        // no tick under a fold's label
        if (scale.folds.some((f) => x > f.x - 4 && x < f.x + f.w + 4)) continue;
        axis.append(h("span", { style: `left:${x}%` }, fmtDuration(t).replace(" ", "")));
      }
    }
    for (const f of scale.folds) {
      axis.append(h("span", { class: "fold", style: `left:${f.x + f.w / 2}%`, title: "a long wait, folded" }, `⋯ ${fmtDuration((f.b - f.a) / 1000)}`));
    }
  }
  return { el, update };
}

// one row per step that started: its attempts as segments ({start, end, status, wait})
function rowsOf(run, waits, now) {
  const byStep = new Map();
  for (const a of run.attempts || []) {
    const start = parseTime(a.started_at);
    if (start === null) continue;
    const end = parseTime(a.finished_at) ?? now;
    (byStep.get(a.step) || byStep.set(a.step, []).get(a.step)).push({ start, end, status: a.status });
  }
  const rows = [];
  for (const [id, st] of Object.entries(run.steps || {})) {
    const start = parseTime(st.started_at);
    if (start === null && !byStep.has(id)) continue;
    const end = parseTime(st.finished_at) ?? (st.status === "running" || st.status === "waiting" ? now : start);
    const segs = byStep.get(id) || [{ start, end, status: st.status }];
    const lastSeg = segs[segs.length - 1];
    if (lastSeg.status === "running" && (FINISHED(st.status) || (st.status === "waiting" && st.waiting))) lastSeg.status = st.status;
    const whole = waits(id);
    for (const seg of segs) seg.wait = whole || seg.status === "waiting";
    const s0 = Math.min(...segs.map((x) => x.start));
    const s1 = Math.max(end ?? s0, ...segs.map((x) => x.end));
    rows.push({ id, status: st.status, segs, start: s0, end: s1, dur: (s1 - s0) / 1000 });
  }
  rows.sort((a, b) => a.start - b.start || a.id.localeCompare(b.id));
  return rows;
}

// the stretches of [t0, t1] where no attempt but waits ran, long enough to fold
function foldable(rows, t0, t1) {
  const work = rows.flatMap((r) => r.segs.filter((x) => !x.wait)).map((x) => [x.start, x.end]).sort((a, b) => a[0] - b[0]);
  const gaps = [];
  let cur = t0;
  for (const [a, b] of work) { if (a > cur) gaps.push([cur, a]); cur = Math.max(cur, b); }
  if (t1 > cur) gaps.push([cur, t1]);
  const min = Math.max(FOLD_SHARE * (t1 - t0), FOLD_MIN_MS);
  return gaps.filter(([a, b]) => b - a >= min);
}

// time -> percent of the track: linear, but each fold takes a fixed few percent
function timeScale(t0, t1, gaps) {
  const fw = Math.min(FOLD_PCT, 36 / Math.max(gaps.length, 1));
  const folded = gaps.reduce((sum, [a, b]) => sum + (b - a), 0);
  const live = Math.max(t1 - t0 - folded, 1);
  const per = (SPAN - fw * gaps.length) / live;
  const folds = [];
  const pieces = [];
  let x = 0, cur = t0;
  for (const [a, b] of gaps) {
    pieces.push([cur, a]);
    x += (a - cur) * per;
    folds.push({ a, b, x, w: fw });
    x += fw;
    cur = b;
  }
  pieces.push([cur, t1]);
  const at = (t) => {
    for (const f of folds) {
      if (t <= f.a) return f.x - (f.a - t) * per;
      if (t < f.b) return f.x + (fw * (t - f.a)) / (f.b - f.a);
    }
    const last = folds[folds.length - 1];
    return last ? last.x + fw + (t - last.b) * per : (t - t0) * per;
  };
  return { at, folds, pieces, live };
}

function niceStep(raw) {
  const steps = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600];
  return steps.find((x) => x >= raw) || 3600 * Math.ceil(raw / 3600);
}
