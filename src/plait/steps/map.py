"""The ``map`` step type (docs/map.md): runs its inline ``step`` once per item of ``over``.

An attempt of a map step only renders ``over`` and checks it: a list of at most
``limits.max_map_items`` items.  Its output goes to the core, which expands the map
(``RunState.expand``): each item becomes a persisted step ``ID[INDEX]`` running the
inline step, with its own attempts, retries and history, and the map ends when its
items have (``core.runstate``).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..core import expressions
from ..core.model import JSON
from ..core.numbers import MAX_INT, shown
from ..errors import FatalError
from .registry import StepCall, StepType, register_step_type


class MapItemsError(FatalError):
    """``over`` did not render to a list, or to more items than the limit allows."""


def _describe(value: JSON) -> str:
    text = repr(value)
    shown = text if len(text) <= 80 else text[:77] + "..."
    return f"{type(value).__name__} {shown}"


def map_items(call: StepCall) -> JSON:
    step = call.step
    value = call.render(step.config.get("over"), "over")
    if not isinstance(value, list):
        raise MapItemsError(f"step {step.id!r}: `over` must render to a list, got "
                            f"{_describe(value)}", step=step.id)
    limit = call.services.limits(call.run.checked.spec.limits).max_map_items
    if len(value) > limit:
        raise MapItemsError(f"step {step.id!r}: `over` rendered {len(value)} items, over "
                            f"limits.max_map_items ({limit})", step=step.id)
    return value


async def run_map(call: StepCall) -> JSON:
    return await call.rendered(map_items, {"over": call.step.config.get("over")})


def _check_map(config: Mapping[str, JSON]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    over = config.get("over")
    if over is not None and not (isinstance(over, list)
                                 or (isinstance(over, str) and expressions.is_template(over))):
        out.append((".over", f"expected a template yielding a list, got {over!r}"))
    concurrency = config.get("concurrency")
    if concurrency is not None and (not isinstance(concurrency, int) or isinstance(
            concurrency, bool) or not 1 <= concurrency <= MAX_INT):
        out.append((".concurrency", f"expected a positive integer (at most {MAX_INT:,}), "
                                    f"got {shown(concurrency)}"))
    step = config.get("step")
    if step is not None and isinstance(step, dict) and step.get("type") == "map":
        out.append((".step.type", "a map's inline step may be of any type but map"))
    return out


def register_map() -> None:
    register_step_type(StepType(name="map", run=run_map,
                                fields=frozenset({"over", "step", "concurrency"}),
                                required=frozenset({"over", "step"}), check=_check_map,
                                literal_fields=frozenset({"step"}), expands=True))
