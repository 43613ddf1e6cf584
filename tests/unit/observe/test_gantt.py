"""Gantt charts: lane order, glyphs per attempt, the axis, the HTML page and escaping."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from plait import Workflow
from plait.observe.gantt import (
    GLYPHS,
    build_timeline,
    critical_path,
    edges_of,
    render_html,
    render_terminal,
    tick_label,
    tick_step,
    ticks,
)
from plait.runtime.engine import Engine
from plait.store import open_store

from .records import T0, attempt, run, step

XSS = "boom <script>alert(1)</script> & 'quotes' \"too\""


def _records():
    """A 10s run: fetch retried twice (0-8s), side failed (1-2s), rescue failed once then
    used its fallback (2-4s), parse after fetch (8-10s), notify skipped."""
    r = run(end=10.0, status="failed", error="failed steps: side")
    steps = [step("fetch", start=0, end=8, attempts=3),
             step("side", "failed", start=1, end=2, error=XSS),
             step("rescue", start=2, end=4, fallback_used=True),
             step("parse", start=8, end=10),
             step("notify", "skipped", start=None, end=None, attempts=0,
                  skip_reason="when was false")]
    attempts = [attempt("fetch", 1, "failed", 0, 2, error="timeout"),
                attempt("fetch", 2, "failed", 3, 5, error="timeout"),
                attempt("fetch", 3, "completed", 6, 8),
                attempt("side", 1, "failed", 1, 2, error=XSS),
                attempt("rescue", 1, "failed", 2, 4, error="nope"),
                attempt("rescue", 1, "completed", 4, 4, fallback=True),
                attempt("parse", 1, "completed", 8, 10)]
    return r, steps, attempts


EDGES = [("fetch", "parse"), ("side", "parse"), ("rescue", "parse"), ("parse", "notify")]


# ------------------------------------------------------------------------ the model


def test_lanes_are_in_start_order_then_steps_that_never_ran():
    timeline = build_timeline(*_records())
    assert [ln.step for ln in timeline.lanes] == ["fetch", "side", "rescue", "parse", "notify"]
    assert (timeline.origin, timeline.span, timeline.active) == (T0, 10.0, False)
    fetch = timeline.lanes[0]
    assert [(s.attempt, s.status) for s in fetch.segments] == [
        (1, "failed"), (2, "failed"), (3, "completed")]
    assert fetch.duration == 8.0
    assert timeline.lanes[-1].ran is False


def test_an_unfinished_attempt_runs_to_now_and_a_waiting_step_shows_waiting():
    r = run(status="waiting", end=None)
    steps = [step("draft", start=0, end=1), step("review", "waiting", start=1, end=None)]
    attempts = [attempt("draft", 1, "completed", 0, 1),
                attempt("review", 1, "running", 1, None)]
    timeline = build_timeline(r, steps, attempts, now=T0 + 30)
    review = timeline.lanes[1]
    assert (timeline.span, timeline.active) == (30.0, True)
    assert review.segments[0].status == "waiting"
    assert (review.segments[0].end, review.segments[0].finished) == (T0 + 30, False)


def test_critical_path_follows_the_parent_that_finished_last():
    timeline = build_timeline(*_records())
    assert critical_path(timeline, EDGES) == ["fetch", "parse"]
    assert critical_path(timeline, []) == ["parse"]


def test_edges_of_a_checked_workflow():
    wf = Workflow("edges")
    wf.add_step("a", lambda input: 1)
    wf.add_step("b", lambda input: 1, depends_on=["a"])
    wf.add_step("c", lambda input: 1, depends_on=["a", "b"])
    assert sorted(edges_of(wf.validate())) == [("a", "b"), ("a", "c"), ("b", "c")]


@pytest.mark.parametrize(("span", "most", "step"), [(10, 10, 1.0), (3.66, 8, 0.5),
                                                     (95, 8, 15.0), (0.004, 4, 0.001),
                                                     (7200, 6, 1800.0)])
def test_tick_steps_are_round(span, most, step):
    assert tick_step(span, most) == step


def test_ticks_and_labels():
    assert ticks(10, 5) == [0, 2, 4, 6, 8, 10]
    assert ticks(0, 5) == [0.0]
    assert [tick_label(t, 0.5) for t in (0, 0.5, 1.5)] == ["0s", "500ms", "1.5s"]
    assert [tick_label(t, 60) for t in (0, 120)] == ["0s", "2m"]
    assert tick_label(7200, 3600) == "2h"


# ------------------------------------------------------------------------ terminal



def _rows(text: str) -> dict[str, str]:
    return {line.split()[0]: line for line in text.splitlines() if "│" in line}


def test_terminal_chart_rows_glyphs_and_durations():
    text = render_terminal(*_records(), width=90)
    rows = _rows(text)
    assert list(rows) == ["fetch", "side", "rescue", "parse", "notify"]
    bars = {k: v.split("│")[1] for k, v in rows.items()}
    # fetch: two failed attempts and the completed one, separated by retry waits
    assert re.fullmatch(r"▒+·+▒+·+█+ +", bars["fetch"])
    assert "▒" in bars["side"] and "█" not in bars["side"]
    assert re.fullmatch(r" +▒+◆ +", bars["rescue"])
    assert re.fullmatch(r" +█+", bars["parse"])
    assert bars["notify"].strip() == ""
    assert rows["fetch"].endswith("8s  completed (3 attempts)")
    assert rows["rescue"].endswith("2s  completed (fallback)")
    assert rows["side"].endswith("1s  failed")
    assert rows["notify"].endswith("-  skipped (when was false)")
    assert len({line.index("│") for line in rows.values()}) == 1  # bars line up
    assert len({len(b) for b in bars.values()}) == 1


def test_terminal_chart_header_axis_and_legend():
    lines = render_terminal(*_records(), width=90).splitlines()
    assert lines[0] == "wf v1  run r1  failed  took 10s"
    axis = next(i for i, line in enumerate(lines) if "└" in line)
    assert lines[axis].count("┴") == 6  # 0, 2, 4, 6, 8, 10 seconds
    assert lines[axis + 1].split() == ["0s", "2s", "4s", "6s", "8s", "10s"]
    assert all(f"{GLYPHS[k]} " in lines[-1] for k in ("completed", "failed", "fallback"))
    assert all(len(line) <= 90 for line in lines[:-1] if "skipped" not in line)


def test_terminal_positions_follow_time():
    bars = {k: v.split("│")[1] for k, v in _rows(render_terminal(*_records(),
                                                                  width=90)).items()}
    width = len(bars["fetch"])
    assert bars["parse"].index("█") == round(0.8 * width)  # parse starts at 8s of 10s
    assert bars["side"].index("▒") == round(0.1 * width)


def test_retries_stay_separate_segments_even_when_squeezed():
    r = run(end=100.0)
    steps = [step("s", start=0, end=0.3, attempts=3), step("long", start=0, end=100)]
    attempts = [attempt("s", 1, "failed", 0.0, 0.1), attempt("s", 2, "failed", 0.1, 0.2),
                attempt("s", 3, "completed", 0.2, 0.3),
                attempt("long", 1, "completed", 0, 100)]
    bar = _rows(render_terminal(r, steps, attempts, width=60))["s"].split("│")[1]
    assert re.match(r"▒·▒·█ ", bar)


def test_terminal_glyphs_for_running_waiting_and_cancelled():
    r = run(status="running", end=None)
    steps = [step("a", "cancelled", start=0, end=1), step("b", "running", start=0, end=None),
             step("c", "waiting", start=0, end=None)]
    attempts = [attempt("a", 1, "cancelled", 0, 1), attempt("b", 1, "running", 0, None),
                attempt("c", 1, "running", 0, None)]
    text = render_terminal(r, steps, attempts, width=60, now=T0 + 4)
    bars = {k: v.split("│")[1] for k, v in _rows(text).items()}
    assert set(bars["a"].strip()) == {GLYPHS["cancelled"]}
    assert set(bars["b"]) == {GLYPHS["running"]}  # to now, the whole span
    assert set(bars["c"]) == {GLYPHS["waiting"]}
    assert "running for 4s" in text.splitlines()[0]


def test_terminal_colour_is_optional():
    assert "\x1b[" not in render_terminal(*_records())
    coloured = render_terminal(*_records(), color=True)
    assert "\x1b[31m▒" in coloured and "\x1b[32m█" in coloured


# ------------------------------------------------------------------------ HTML

VOID = {"meta", "input", "br", "img", "link", "hr"}


class _Checker(HTMLParser):
    """Checks that every element is closed in order; records tags and attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.seen: list[tuple[str, dict[str, str | None]]] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.seen.append((tag, dict(attrs)))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unexpected </{tag}> with open {self.stack}")
        else:
            self.stack.pop()


def _parse(page: str) -> _Checker:
    checker = _Checker()
    checker.feed(page)
    checker.close()
    return checker


def test_html_is_well_formed_and_self_contained():
    page = render_html(*_records(), graph_edges=EDGES)
    assert page.startswith("<!DOCTYPE html>")
    checker = _parse(page)
    assert checker.errors == [] and checker.stack == []
    tags = [t for t, _ in checker.seen]
    assert tags.count("html") == tags.count("body") == tags.count("style") == 1
    assert tags.count("script") == 1
    assert not any(t in {"link", "img", "iframe"} for t in tags)
    assert not any(k in {"src", "href"} for _, attrs in checker.seen for k in attrs)
    assert "http://" not in page and "https://" not in page and "@import" not in page


def test_html_has_one_bar_per_attempt_with_tooltip_data():
    page = render_html(*_records())
    bars = [a for t, a in _parse(page).seen if t == "div"
            and (a.get("class") or "").startswith("bar ")]
    assert len(bars) == 7
    side = next(b for b in bars if b["data-step"] == "side")
    assert side["data-error"] == XSS  # the parser unescapes: the text survives intact
    assert side["data-status"] == "failed"
    assert side["data-dur"] == "1s"
    fallback = next(b for b in bars if "fb" in (b["class"] or ""))
    assert fallback["data-attempt"] == "fallback (after attempt 1)"


def test_html_escapes_every_user_string():
    r, steps, attempts = _records()
    steps.append(step('odd"<b>id', "skipped", start=None, end=None, attempts=0,
                      skip_reason="<img src=x onerror=alert(2)>"))
    r.error = "<script>alert(3)</script>"
    page = render_html(r, steps, attempts)
    assert "<script>alert" not in page
    assert "<img" not in page and '"<b>' not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "odd&quot;&lt;b&gt;id" in page
    assert _parse(page).errors == []


def test_html_header_legend_axis_and_highlight():
    page = render_html(*_records(), graph_edges=EDGES)
    for text in ("wf <span class=\"ver\">v1</span>", ">failed</span>", "failed attempt",
                 "fallback", "retry wait", "highlight critical path", ">10s<",
                 "6 (2 retries)", "failed steps: side"):
        assert text in page, text
    rows = re.findall(r'<div class="row( hl)?"><div class="label" title="(\w+)"', page)
    assert [(name, bool(hl)) for hl, name in rows] == [
        ("fetch", True), ("side", False), ("rescue", False), ("parse", True),
        ("notify", False)]
    assert "highlight slowest steps" in render_html(*_records())


async def test_html_of_a_real_run():
    wf = Workflow("gantt-real")
    wf.add_step("a", lambda input: 1)
    wf.add_step("b", lambda input: 2, depends_on=["a"])
    store = open_store("memory://")
    result = await Engine(store).run(wf.validate(), {})
    run_id = result.run_id
    args = (await store.get_run(run_id), await store.get_steps(run_id),
            await store.get_attempts(run_id))
    page = render_html(*args, graph_edges=edges_of(wf.validate()))
    assert _parse(page).errors == []
    assert page.count('class="bar completed"') == 2
    assert "gantt-real" in render_terminal(*args)
