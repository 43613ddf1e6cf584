"""Map steps (docs/map.md): the names of their items and the StepSpec each item runs.

A map step ``fetch`` renders ``over`` to a list; item ``k`` is the persisted step
``fetch[k]`` running the map's inline step (``StepSpec.item``).  User ids never contain
brackets, so item ids cannot collide with them.
"""

from __future__ import annotations

from .model import StepSpec, new_step


def item_id(map_id: str, index: int) -> str:
    return f"{map_id}[{index}]"


def split_item_id(step_id: str) -> tuple[str, int] | None:
    """``("fetch", 3)`` for ``"fetch[3]"``; None for any other id."""
    head, sep, tail = step_id.partition("[")
    if not sep or not tail.endswith("]") or not tail[:-1].isdigit():
        return None
    return head, int(tail[:-1])


def item_step(template: StepSpec, step_id: str) -> StepSpec:
    """The inline step ``template`` as the step of one item, named ``step_id``."""
    t = template
    return new_step(id=step_id, type=t.type, config=t.config, retry=t.retry,
                    timeout=t.timeout, fallback=t.fallback, allow_failure=t.allow_failure,
                    circuit_breaker=t.circuit_breaker, pool=t.pool,
                    description=t.description, func=t.func)


def map_concurrency(step: StepSpec, default: int) -> int:
    """How many of a map's items may run at once (its ``concurrency``, else the run's)."""
    value = step.config.get("concurrency")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 \
        else default
