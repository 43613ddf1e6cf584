"""Parallel research: three researchers at once, two analysts in turn, one synthesiser.

The shape of a typical AI-agent pipeline, built with the Python API.  The "LLM" is a
deterministic fake (``fake_llm``) that sleeps a little like a real model call, so the
example runs offline and always gives the same answer.  plait infers every dependency
from parameter names: ``topic`` is a key of the run input, ``research_market`` is the
output of the step of that name, and so on.

Run it:

    python examples/parallel_research/main.py "AI agents"

It prints a timeline of the steps: the three researchers start together and overlap in
time (their ``started_at`` / ``finished_at``), the analysts run one after the other and
the synthesiser runs last.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from typing import Any

from plait import RunResult, Workflow

MODEL_SECONDS = 0.2  # how long the fake model "thinks" per call
Note = dict[str, Any]  # what each fake model call returns (JSON)
RESEARCHERS = ("research_market", "research_technology", "research_risks")

wf = Workflow(
    "parallel-research",
    concurrency=8,
    description="Three researchers in parallel, two analysts in turn, one synthesiser",
    input={"type": "object", "required": ["topic"],
           "properties": {"topic": {"type": "string", "minLength": 1}}},
)


async def fake_llm(role: str, prompt: str) -> str:
    """Stands in for a chat-completion call: slow, and a pure function of its input."""
    await asyncio.sleep(MODEL_SECONDS)
    return f"{role}: {prompt}"


@wf.step
async def research_market(topic: str) -> Note:
    note = await fake_llm("market researcher", f"who pays for {topic}")
    return {"angle": "market", "note": note, "facts": [f"{topic} buyers are platform teams"]}


@wf.step
async def research_technology(topic: str) -> Note:
    note = await fake_llm("technology researcher", f"how {topic} are built")
    return {"angle": "technology", "note": note,
            "facts": [f"{topic} run as graphs of model and tool calls"]}


@wf.step
async def research_risks(topic: str) -> Note:
    note = await fake_llm("risk researcher", f"what goes wrong with {topic}")
    return {"angle": "risks", "note": note,
            "facts": [f"{topic} fail on flaky APIs, so calls need retries"]}


@wf.step
async def analyst_trends(research_market: Note,
                         research_technology: Note,
                         research_risks: Note) -> Note:
    """The first analyst reads all three researchers."""
    facts = [f for r in (research_market, research_technology, research_risks)
             for f in r["facts"]]
    note = await fake_llm("trend analyst", f"{len(facts)} facts")
    return {"note": note, "facts": facts}


@wf.step
async def analyst_critic(analyst_trends: Note) -> Note:
    """The second analyst works after the first: it reviews the first one's analysis."""
    note = await fake_llm("critic", f"review of: {analyst_trends['note']}")
    return {"note": note, "approved": True}


@wf.step
async def synthesise(topic: str, analyst_trends: Note,
                     analyst_critic: Note) -> Note:
    await fake_llm("synthesiser", topic)
    lines = [f"Report on {topic}"] + [f"- {fact}" for fact in analyst_trends["facts"]]
    return {"report": "\n".join(lines), "reviewed": analyst_critic["approved"]}


def overlap_seconds(result: RunResult, steps: Sequence[str]) -> float:
    """How long all of ``steps`` were running at the same time (0 when they were not)."""
    starts = [result.steps[s].started_at or 0.0 for s in steps]
    ends = [result.steps[s].finished_at or 0.0 for s in steps]
    return max(0.0, min(ends) - max(starts))


def timeline(result: RunResult) -> str:
    """One line per step: when it started and finished, relative to the run's start."""
    t0 = result.started_at or 0.0
    lines = []
    for step_id, step in result.steps.items():
        start = (step.started_at or t0) - t0
        end = (step.finished_at or t0) - t0
        bar = " " * int(start * 20) + "#" * max(1, int((end - start) * 20))
        lines.append(f"{step_id:<20} {start:5.2f}s -> {end:5.2f}s  {bar}")
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    topic = argv[0] if argv else "AI agents"
    result = wf.run({"topic": topic})
    print(timeline(result))
    print()
    together = overlap_seconds(result, RESEARCHERS)
    print(f"the three researchers ran together for {together:.2f}s")
    print(f"status: {result.status} in {result.duration_s:.2f}s")
    if result.ok:
        print()
        output: Any = result.output
        print(output["synthesise"]["report"])
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
