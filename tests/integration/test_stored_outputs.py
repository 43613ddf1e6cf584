"""What the memory store keeps of a step's output is its own copy: a step (or its
child, or the caller) changing the returned object afterwards changes neither the
stored output nor what later reads of it return."""

from __future__ import annotations

from typing import Any

import plait
from plait import StepContext, Workflow


async def test_an_output_changed_after_its_step_returned_stays_as_stored() -> None:
    kept: list[dict[str, Any]] = []
    wf = Workflow("mutating")

    @wf.step()
    async def make() -> dict[str, Any]:
        value = {"items": [1], "meta": {"n": 1}}
        kept.append(value)  # the step keeps a reference to what it returned
        return value

    @wf.step()
    async def change_parent(make: dict[str, Any]) -> dict[str, int]:
        make["items"].append(2)  # a child changes the output it was given
        return {"seen": len(make["items"])}

    @wf.step(depends_on=["make"])
    async def read_context(ctx: StepContext) -> dict[str, int]:
        ctx.outputs["make"]["meta"]["n"] = 99  # so does one reading ctx.outputs
        return {"ok": 1}

    async with plait.connect("memory://") as db:
        result = await wf.run_async(None, db=db)
        assert result.status == "completed"
        kept[0]["items"].append(3)  # and the step's own code, after the run
        stored = {s.step_id: s for s in await db.store.get_steps(result.run_id)}
        assert stored["make"].output == {"items": [1], "meta": {"n": 1}}
        stored["make"].output["items"].clear()  # a reader's copy is its own too
        again = {s.step_id: s for s in await db.store.get_steps(result.run_id)}
        assert again["make"].output == {"items": [1], "meta": {"n": 1}}
        assert again["change_parent"].output == {"seen": 2}
