// The Gantt chart: one row per step that started, a bar per attempt (or the step's span
// when attempts are not listed), on one time axis; rows are virtualized.

import { h, COLORS, parseTime, fmtDuration } from "./util.js";
import { virtualList } from "./vlist.js";

export function gantt({ onSelect }) {
  const axis = h("div", { class: "axis" });
  let scale = { t0: 0, span: 1 };
  const list = virtualList({
    rowHeight: 28, maxHeight: 380,
    renderRow(row, el) {
      el.title = `${row.id}: ${row.status} · ${fmtDuration(row.dur)}`;
      const track = h("div", { class: "track" });
      for (const seg of row.segs) {
        const left = ((seg.start - scale.t0) / scale.span) * SPAN;
        const width = ((seg.end - seg.start) / scale.span) * SPAN;
        track.append(h("div", { class: "bar", "data-step": row.id,
          style: `left:${left}%;width:${Math.max(width, 0.15)}%;background:${COLORS[seg.status] || COLORS.pending}` }));
      }
      el.append(h("span", { class: "glabel" }, row.id), track);
      el.addEventListener("click", () => onSelect(row.id));
    },
  });
  const el = h("div", { class: "gantt", "data-testid": "gantt" }, axis, list.el);
  function update(run) {
    const now = Date.now();
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
      if (lastSeg.status === "running" && (FINISHED(st.status) || st.status === "waiting")) lastSeg.status = st.status;
      const s0 = Math.min(...segs.map((x) => x.start));
      const s1 = Math.max(end ?? s0, ...segs.map((x) => x.end));
      rows.push({ id, status: st.status, segs, start: s0, end: s1, dur: (s1 - s0) / 1000 });
    }
    rows.sort((a, b) => a.start - b.start || a.id.localeCompare(b.id));
    const t0 = rows.length ? Math.min(...rows.map((r) => r.start)) : now;
    const t1 = rows.length ? Math.max(...rows.map((r) => r.end)) : now;
    scale = { t0, span: Math.max(t1 - t0, 1) };
    axis.textContent = "";
    const step = niceStep(scale.span / 1000 / 6);
    for (let t = 0; t <= scale.span / 1000 + 1e-9; t += step) {
      axis.append(h("span", { style: `left:${((t * 1000) / scale.span) * SPAN}%` }, fmtDuration(t).replace(" ", "")));
    }
    list.setItems(rows);
    return rows.length;
  }
  return { el, update };
}

const SPAN = 94;   // percent of the track the run's span covers (room for the last label)
const FINISHED = (st) => st === "completed" || st === "failed" || st === "cancelled";

function niceStep(raw) {
  const steps = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600];
  return steps.find((x) => x >= raw) || 3600 * Math.ceil(raw / 3600);
}
