"""Python steps the browser tests' definitions call (the test server allows
PLAIT_ALLOWED_MODULES=browser.steps_for_ui; tests/ is on sys.path)."""

from __future__ import annotations

import asyncio
from typing import Any


async def report(ctx: Any, seconds: float) -> dict[str, str]:
    ctx.logger.info("halfway there")
    await asyncio.sleep(seconds)
    return {"report": "ready"}


def explode(reason: str) -> str:
    raise ValueError(f"cannot continue: {reason}")


async def journaled(ctx: Any) -> list[str]:
    """Two journaled calls (ctx.run), listed in the step panel."""
    return [await ctx.run("plan", str.upper, "plan"), await ctx.run("act", str, "act")]
