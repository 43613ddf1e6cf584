"""The HTML Gantt page: one self-contained file (inline CSS and a small script for
tooltips) showing a run's timeline, built on ``gantt``'s timeline."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from ..store.base import AttemptRecord, RunRecord, StepRecord
from .gantt import (
    Edge,
    Lane,
    Segment,
    Timeline,
    build_timeline,
    critical_path,
    format_span,
    run_duration,
    slowest,
    tick_label,
    tick_step,
    ticks,
)

_CSS = """
:root{--label:230px;--dur:150px;--row:32px;--ok:#2f9e44;--fail:#e03131;--cancel:#868e96;
--run:#1c7ed6;--wait:#f59f00;--fb:#7048e8;--skip:#ced4da;--upfail:#c2255c;--ink:#212529;
--muted:#868e96;--line:#e9ecef}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
color:var(--ink);background:#f1f3f5}
main{max-width:1600px;margin:0 auto;padding:24px}
.card{background:#fff;border-radius:10px;box-shadow:0 1px 3px rgba(0,0,0,.08);
padding:18px 22px;margin-bottom:16px}
.mono,.label,.facts .mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
.title{display:flex;align-items:center;gap:12px}
h1{font-size:21px;margin:0}h1 .ver{color:var(--muted);font-weight:500}
h2{font-size:15px;margin:0 0 10px}
.pill{display:inline-block;padding:2px 10px;border-radius:999px;font-size:12px;
font-weight:600;color:#fff;background:var(--muted)}
.facts{display:flex;gap:32px;flex-wrap:wrap;margin:14px 0 0}
.facts div{min-width:0}.facts dt{font-size:11px;text-transform:uppercase;letter-spacing:.06em;
color:var(--muted)}.facts dd{margin:2px 0 0;font-weight:600}
.runerr{margin:14px 0 0;padding:8px 12px;border-left:3px solid var(--fail);background:#fff5f5;
white-space:pre-wrap;font-size:13px}
.legend{display:flex;flex-wrap:wrap;gap:18px;align-items:center;font-size:13px;
margin-bottom:14px;color:#495057}
.legend .sw{display:inline-block;width:22px;height:12px;border-radius:3px;
vertical-align:-1px;margin-right:6px}
.legend .sw.fb{width:11px;height:11px;border-radius:2px;transform:rotate(45deg);margin:0 9px 0 4px}
.legend label{margin-left:auto;cursor:pointer;user-select:none}
.axis{display:grid;grid-template-columns:var(--label) 1fr var(--dur);height:22px}
.axis .scale{position:relative}
.tick{position:absolute;transform:translateX(-50%);font-size:11px;color:var(--muted);
white-space:nowrap;font-variant-numeric:tabular-nums}
.tick.first{transform:none}.tick.last{transform:translateX(-100%)}
.tick.end{left:100%;color:var(--ink);font-weight:600}
.axis.top .tick{bottom:4px}.axis.bottom .tick{top:4px}
.lanes{position:relative;border-top:1px solid var(--line);border-bottom:1px solid var(--line)}
.grid{position:absolute;top:0;bottom:0;left:var(--label);right:var(--dur);pointer-events:none}
.grid i{position:absolute;top:0;bottom:0;border-left:1px solid var(--line)}
.grid i.now{border-left:2px dashed var(--run)}
.row{position:relative;display:grid;grid-template-columns:var(--label) 1fr var(--dur);
height:var(--row);align-items:center}
.row:nth-child(even){background:rgba(248,249,250,.6)}
.row:hover{background:rgba(231,245,255,.55)}
.label{font-size:13px;display:flex;align-items:center;gap:8px;padding-right:12px;min-width:0}
.label .id{overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.dot{flex:none;width:9px;height:9px;border-radius:50%;background:var(--muted)}
.badge{display:none;flex:none;font:600 10px system-ui,sans-serif;color:#9c5b00;
background:#fff3bf;border-radius:4px;padding:1px 5px;text-transform:uppercase;
letter-spacing:.04em}
.track{position:relative;height:100%}
.span{position:absolute;top:calc(50% - 1px);height:2px;background:#ced4da;border-radius:1px}
.bar{position:absolute;top:8px;height:16px;border-radius:4px;min-width:3px;cursor:pointer;
outline:none;box-shadow:inset 0 -1px 0 rgba(0,0,0,.15)}
.bar:hover,.bar:focus{filter:brightness(1.1);box-shadow:0 0 0 2px #fff,0 0 0 3px var(--ink)}
.bar.completed{background:linear-gradient(#40c057,var(--ok))}
.bar.failed{background:repeating-linear-gradient(135deg,#ff6b6b 0 5px,var(--fail) 5px 10px)}
.bar.cancelled{background:repeating-linear-gradient(90deg,#adb5bd 0 3px,var(--cancel) 3px 6px)}
.bar.running{background:repeating-linear-gradient(-45deg,#4dabf7 0 8px,var(--run) 8px 16px);
background-size:22.6px 22.6px;animation:mv 1s linear infinite}
.bar.waiting{background:repeating-linear-gradient(45deg,#ffd43b 0 5px,var(--wait) 5px 10px)}
.bar.fb{top:10px;width:12px;height:12px;min-width:0;border-radius:2px;background:var(--fb);
transform:translateX(2px) rotate(45deg)}
@keyframes mv{to{background-position:22.6px 0}}
.skipnote{position:absolute;left:6px;top:7px;font-size:12px;color:var(--muted);
font-style:italic;white-space:nowrap}
.dur{text-align:right;font-variant-numeric:tabular-nums;font-size:13px;color:#495057;
padding-left:12px;white-space:nowrap}
.dur small{color:var(--muted);margin-left:4px}
.hl-on .row.hl{background:rgba(255,243,191,.45)}
.hl-on .row.hl .badge{display:inline-block}
.hl-on .row.hl .bar:not(.fb){box-shadow:0 0 0 2px #fff,0 0 0 4px #fcc419}
.s-completed{background:var(--ok)}.s-failed{background:var(--fail)}
.s-cancelled{background:var(--cancel)}.s-running,.s-queued{background:var(--run)}
.s-waiting{background:var(--wait)}.s-skipped,.s-pending{background:var(--skip)}
.s-upstream_failed{background:var(--upfail)}.s-fallback{background:var(--fb)}
.pill.s-skipped,.pill.s-pending{color:#495057}
table{border-collapse:collapse;width:100%;font-size:13px}
th{text-align:left;font-size:11px;text-transform:uppercase;letter-spacing:.06em;
color:var(--muted);font-weight:600;padding:6px 10px;border-bottom:1px solid var(--line)}
td{padding:6px 10px;border-bottom:1px solid #f1f3f5;vertical-align:top}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td pre{margin:0;white-space:pre-wrap;word-break:break-word;font-size:12px;color:#c92a2a;
max-height:8em;overflow:auto}
#tip{position:fixed;left:0;top:0;z-index:10;pointer-events:none;opacity:0;
transition:opacity .08s;background:#212529;color:#f1f3f5;padding:9px 12px;border-radius:7px;
font-size:12px;max-width:440px;box-shadow:0 6px 20px rgba(0,0,0,.25)}
#tip.show{opacity:1}#tip .h{font-weight:700;font-size:13px;margin-bottom:4px}
#tip b{color:#adb5bd;font-weight:500;display:inline-block;min-width:64px}
#tip pre{margin:6px 0 0;white-space:pre-wrap;word-break:break-word;color:#ffa8a8;
font-size:11.5px;max-height:12em;overflow:hidden}
"""

_JS = """
(function(){
var tip=document.getElementById('tip');
function add(k,v){if(!v)return;var d=document.createElement('div'),b=document.createElement('b');
b.textContent=k;d.appendChild(b);d.appendChild(document.createTextNode(v));tip.appendChild(d);}
function place(x,y){var r=tip.getBoundingClientRect(),nx=x+14,ny=y+16;
if(nx+r.width>innerWidth-8)nx=x-r.width-14;if(ny+r.height>innerHeight-8)ny=y-r.height-16;
tip.style.left=Math.max(8,nx)+'px';tip.style.top=Math.max(8,ny)+'px';}
function show(el,x,y){var d=el.dataset;tip.replaceChildren();
var h=document.createElement('div');h.className='h';h.textContent=d.step+' \\u00b7 '+d.attempt;
tip.appendChild(h);add('status',d.status);add('start',d.start);add('end',d.end);
add('duration',d.dur);add('worker',d.worker);
if(d.error){var p=document.createElement('pre');p.textContent=d.error;tip.appendChild(p);}
tip.classList.add('show');place(x,y);}
document.addEventListener('mouseover',function(e){var b=e.target.closest('.bar');
if(b)show(b,e.clientX,e.clientY);else tip.classList.remove('show');});
document.addEventListener('mousemove',function(e){if(e.target.closest('.bar'))place(e.clientX,e.clientY);});
document.addEventListener('focusin',function(e){var b=e.target.closest('.bar');
if(b){var r=b.getBoundingClientRect();show(b,r.left,r.bottom);}});
document.addEventListener('focusout',function(){tip.classList.remove('show');});
var t=document.getElementById('hl');
if(t)t.addEventListener('change',function(){document.body.classList.toggle('hl-on',t.checked);});
})();
"""

_LEGEND = (("completed", "completed"), ("failed", "failed attempt"),
           ("cancelled", "cancelled"), ("running", "running"), ("waiting", "waiting"))


def _e(value: object) -> str:
    """Escaped for HTML text and double- or single-quoted attribute values."""
    return html.escape(str(value), quote=True)


class _Page:
    """Positions and labels of one timeline, shared by the HTML pieces."""

    def __init__(self, timeline: Timeline, highlighted: Sequence[str], critical: bool) -> None:
        self.t = timeline
        self.highlighted = frozenset(highlighted)
        self.critical = critical

    def pct(self, at: float) -> str:
        span = self.t.span or 1.0
        return f"{max(0.0, min(100.0, (at - self.t.origin) / span * 100)):.4f}%"

    def width(self, start: float, end: float) -> str:
        span = self.t.span or 1.0
        return f"{max(0.0, (end - start) / span * 100):.4f}%"

    def when(self, at: float) -> str:
        return f"+{format_span(at - self.t.origin)}  ({_clock(at, millis=True)})"


def _clock(at: float, *, millis: bool = False) -> str:
    """``2025-01-31 14:05:09 UTC`` (with ``.123`` milliseconds when asked)."""
    moment = datetime.fromtimestamp(at, UTC)
    text = moment.strftime("%Y-%m-%d %H:%M:%S")
    return f"{text}.{moment.microsecond // 1000:03d} UTC" if millis else f"{text} UTC"


def _header_html(page: _Page) -> str:
    t = page.t
    run = t.run
    counts: dict[str, int] = {}
    for lane in t.lanes:
        counts[str(lane.status)] = counts.get(str(lane.status), 0) + 1
    tries = sum(1 for ln in t.lanes for s in ln.segments if not s.fallback)
    retries = sum(max(0, ln.attempts - 1) for ln in t.lanes)
    verb = "running for" if t.active else "duration"
    start = run.started_at if run.started_at is not None else run.created_at
    facts = [("run", f'<span class="mono">{_e(run.run_id)}</span>'),
             ("started", _e(_clock(start))),
             (verb, _e(format_span(run_duration(t)))),
             ("steps", _e(f"{len(t.lanes)}: " + ", ".join(
                 f"{n} {s}" for s, n in sorted(counts.items())))),
             ("attempts", _e(f"{tries} ({retries} retries)"))]
    if run.sla is not None:
        facts.append(("sla", _e(format_span(run.sla))))
    items = "".join(f"<div><dt>{k}</dt><dd>{v}</dd></div>" for k, v in facts)
    error = f'<div class="runerr">{_e(run.error)}</div>' if run.error else ""
    return (f'<header class="card"><div class="title"><h1>{_e(run.workflow)} '
            f'<span class="ver">v{_e(run.version)}</span></h1>'
            f'<span class="pill s-{_e(run.status)}">{_e(run.status)}</span></div>'
            f'<dl class="facts">{items}</dl>{error}</header>')


def _legend_html(page: _Page) -> str:
    swatches = [f'<span><span class="sw bar {k}" style="position:static"></span>{_e(v)}</span>'
                for k, v in _LEGEND]
    swatches.append('<span><span class="sw fb s-fallback"></span>fallback</span>')
    swatches.append('<span><span class="sw" style="height:2px;background:#ced4da"></span>'
                    'retry wait</span>')
    if page.highlighted:
        what = "critical path" if page.critical else "slowest steps"
        swatches.append(f'<label><input type="checkbox" id="hl" checked> highlight {what}'
                        f"</label>")
    return f'<div class="legend">{"".join(swatches)}</div>'


def _axis_html(page: _Page, where: str) -> str:
    span = page.t.span
    marks = ticks(span, 10)
    step = tick_step(span, 10) if span > 0 else 1.0
    ends_on_tick = marks[-1] >= span * 0.999
    spans = []
    for i, t in enumerate(marks):
        if not ends_on_tick and t > span * 0.92:
            continue  # too close to the end label
        edge = " first" if i == 0 else (" last" if t >= span * 0.98 else "")
        left = page.pct(page.t.origin + t)
        spans.append(f'<span class="tick{edge}" style="left:{left}">{tick_label(t, step)}</span>')
    if span > 0 and not ends_on_tick:  # the end of the run, labelled with its length
        spans.append(f'<span class="tick last end">{_e(format_span(span))}</span>')
    return (f'<div class="axis {where}"><div></div><div class="scale">{"".join(spans)}</div>'
            f"<div></div></div>")


def _grid_html(page: _Page) -> str:
    span = page.t.span
    lines = [f'<i style="left:{page.pct(page.t.origin + t)}"></i>' for t in ticks(span, 10)]
    if page.t.active:
        lines.append('<i class="now" style="left:100%" title="now"></i>')
    elif span > 0 and ticks(span, 10)[-1] < span * 0.999:
        lines.append('<i style="left:100%"></i>')  # the end of the run
    return f'<div class="grid">{"".join(lines)}</div>'


def _bar_html(page: _Page, seg: Segment) -> str:
    what = (f"fallback (after attempt {seg.attempt})" if seg.fallback
            else f"attempt {seg.attempt}")
    data = {"step": seg.step, "attempt": what, "status": seg.status,
            "start": page.when(seg.start),
            "end": page.when(seg.end) if seg.finished else "(not finished)",
            "dur": format_span(seg.duration) + ("" if seg.finished else " so far"),
            "worker": seg.worker or "", "error": seg.error or ""}
    attrs = " ".join(f'data-{k}="{_e(v)}"' for k, v in data.items())
    kind = "fb s-fallback" if seg.fallback else seg.status
    width = "" if seg.fallback else f";width:{page.width(seg.start, seg.end)}"
    label = _e(f"{seg.step} {what}: {seg.status}, {format_span(seg.duration)}")
    return (f'<div class="bar {_e(kind)}" tabindex="0" aria-label="{label}" '
            f'style="left:{page.pct(seg.start)}{width}" {attrs}></div>')


def _row_html(page: _Page, lane: Lane) -> str:
    parts = []
    if lane.start is not None and lane.end is not None:
        parts.append(f'<div class="span" style="left:{page.pct(lane.start)};'
                     f'width:{page.width(lane.start, lane.end)}"></div>')
        parts += [_bar_html(page, seg) for seg in lane.segments]
        extra = f"<small>&times;{lane.attempts}</small>" if lane.attempts > 1 else ""
        dur = f"{_e(format_span(lane.duration))}{extra}"
    else:
        reason = f": {lane.skip_reason}" if lane.skip_reason else ""
        parts.append(f'<span class="skipnote">{_e(f"{lane.status}{reason}")}</span>')
        dur = "&ndash;"
    hl = " hl" if lane.step in page.highlighted else ""
    badge = "critical" if page.critical else "slow"
    return (f'<div class="row{hl}"><div class="label" title="{_e(lane.step)}">'
            f'<span class="dot s-{_e(lane.status)}"></span><span class="id">{_e(lane.step)}'
            f'</span><span class="badge">{badge}</span></div>'
            f'<div class="track">{"".join(parts)}</div><div class="dur">{dur}</div></div>')


def _table_html(page: _Page) -> str:
    rows = []
    for lane in page.t.lanes:
        start = ("&ndash;" if lane.start is None
                 else _e(f"+{format_span(lane.start - page.t.origin)}"))
        error = f"<pre>{_e(lane.error)}</pre>" if lane.error else _e(lane.skip_reason or "")
        duration = _e(format_span(lane.duration)) if lane.duration is not None else "&ndash;"
        rows.append(f'<tr><td class="mono">{_e(lane.step)}</td><td><span class="pill '
                    f's-{_e(lane.status)}">{_e(lane.status)}</span></td>'
                    f'<td class="num">{lane.attempts}</td><td class="num">{start}</td>'
                    f'<td class="num">{duration}</td><td>{error}</td></tr>')
    head = ("<tr><th>step</th><th>status</th><th>attempts</th><th>start</th>"
            "<th>duration</th><th>error / reason</th></tr>")
    return (f'<section class="card"><h2>Steps</h2><table>{head}{"".join(rows)}</table>'
            f"</section>")


def render_html(run: RunRecord, steps: Sequence[StepRecord], attempts: Sequence[AttemptRecord],
                graph_edges: Iterable[Edge] | None = None, *, now: float | None = None) -> str:
    """One self-contained HTML page (inline CSS and JS, no external resources): the run
    header, a legend, the timeline with a bar per attempt, hover tooltips, the critical
    path (or the slowest steps) highlighted, and a table of steps.  Every string from the
    run (ids, errors, reasons) is HTML-escaped; tooltips are filled with ``textContent``."""
    timeline = build_timeline(run, steps, attempts, now=now)
    critical = graph_edges is not None
    highlighted = (critical_path(timeline, graph_edges) if graph_edges is not None
                   else slowest(timeline))
    page = _Page(timeline, highlighted, critical)
    lanes = "".join(_row_html(page, lane) for lane in timeline.lanes)
    chart = (f'<section class="card"><h2>Timeline</h2>{_legend_html(page)}'
             f'{_axis_html(page, "top")}<div class="lanes">{_grid_html(page)}{lanes}</div>'
             f'{_axis_html(page, "bottom")}</section>')
    title = _e(f"{run.workflow} v{run.version} · run {run.run_id} · {run.status}")
    body_class = ' class="hl-on"' if highlighted else ""
    return ("<!DOCTYPE html>\n"
            f'<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{title}</title><style>{_CSS}</style></head>"
            f"<body{body_class}><main>{_header_html(page)}{chart}{_table_html(page)}</main>"
            f'<div id="tip" role="tooltip"></div><script>{_JS}</script></body></html>\n')
