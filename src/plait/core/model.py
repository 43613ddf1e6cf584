"""The workflow model: frozen values that every front end (YAML, JSON, Python) produces."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, cast

JSON: TypeAlias = bool | int | float | str | list["JSON"] | dict[str, "JSON"] | None
JSONDict: TypeAlias = dict[str, JSON]

Trigger = Literal["default", "all_success", "none_failed", "all_done", "one_failed"]
TRIGGERS: tuple[str, ...] = ("default", "all_success", "none_failed", "all_done", "one_failed")
OnFailure = Literal["continue", "fail_fast"]
CatchUp = Literal["skip", "all"]
CATCH_UP: tuple[str, ...] = ("skip", "all")
REDUCERS: tuple[str, ...] = ("append", "extend", "merge", "sum", "max", "min", "replace_last")

DEFAULT_CONCURRENCY = 16


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How a failed attempt is retried (docs/semantics.md).  ``max_retries`` counts retries, so a
    step runs at most ``max_retries + 1`` attempts."""

    max_retries: int = 3
    initial_delay: float = 1.0
    backoff: float = 2.0
    max_delay: float = 60.0
    jitter: float = 0.1
    retry_on: tuple[str, ...] = ()
    no_retry_on: tuple[str, ...] = ()


DEFAULT_RETRY = RetryPolicy()


@dataclass(frozen=True, slots=True, kw_only=True)
class Fallback:
    """What a step does once its retries are spent: call a function or use an output."""

    call: str | None = None
    output: JSON = None
    func: Callable[..., object] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class CircuitBreakerSpec:
    key: str
    failure_threshold: int = 5
    reset_after: float = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Rate:
    """At most ``count`` starts in any window of ``period`` seconds."""

    count: int
    period: float

    def __str__(self) -> str:
        names = {1.0: "s", 60.0: "min", 3600.0: "h"}
        unit = names.get(self.period)
        return f"{self.count}/{unit}" if unit else f"{self.count}/{self.period:g}s"


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolSpec:
    name: str
    concurrency: int | None = None
    rate: Rate | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    max_steps: int = 100_000
    max_depth: int = 1_000
    max_map_items: int = 10_000
    max_subworkflow_depth: int = 10
    max_output_bytes: int = 16 * 1024 * 1024  # of one step's output as JSON text
    # the total tokens the run's model calls may spend (llm steps, ctx.llm), None: no
    # bound (docs/limits.md)
    max_llm_tokens: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleSpec:
    """One entry of ``schedules:`` (docs/schedules.md): start a run with ``input`` at every time
    ``cron`` (five fields, or an ``@hourly``-style alias) names in ``timezone``.
    ``catch_up`` says which fires missed while no scheduler ran are started: only the
    latest (``skip``) or each of them (``all``, bounded: ``core.schedule``)."""

    cron: str
    timezone: str = "UTC"
    input: JSON = field(default_factory=dict)
    catch_up: CatchUp = "skip"


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheSpec:
    """``cache: {key, ttl}`` of a step (docs/caching.md): a completed result of the same workflow,
    step and rendered ``key`` younger than ``ttl`` seconds is reused without running."""

    key: str
    ttl: float


@dataclass(frozen=True, slots=True, kw_only=True)
class StepSpec:
    """One step.  ``config`` holds the fields of the step's type (``call``, ``with``,
    ``url``...) as JSON; ``func`` is the callable of a step built in Python."""

    id: str
    type: str
    config: Mapping[str, JSON] = field(default_factory=dict)
    depends_on: tuple[str, ...] = ()
    when: str | None = None
    trigger: Trigger = "default"
    retry: RetryPolicy = DEFAULT_RETRY
    timeout: float | None = None
    fallback: Fallback | None = None
    allow_failure: bool = False
    outputs: tuple[str, ...] = ()
    circuit_breaker: CircuitBreakerSpec | None = None
    pool: str | None = None
    description: str | None = None
    then: tuple[str, ...] = ()
    else_: tuple[str, ...] = ()
    func: Callable[..., object] | None = field(default=None, compare=False, repr=False)
    # a map step's inline step (its `step` field, parsed), run once per item
    item: StepSpec | None = field(default=None, compare=False, repr=False)
    cache: CacheSpec | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowSpec:
    name: str
    steps: tuple[StepSpec, ...]
    version: int | None = None
    description: str | None = None
    input_schema: JSONDict | None = None
    concurrency: int = DEFAULT_CONCURRENCY
    on_failure: OnFailure = "continue"
    timeout: float | None = None
    sla: float | None = None
    pools: Mapping[str, PoolSpec] = field(default_factory=dict)
    reducers: Mapping[str, str] = field(default_factory=dict)
    output: JSON = None
    limits: Limits = Limits()
    alerts: tuple[str, ...] = ()
    notify: JSON = None  # the `notify:` targets as written (plait.observe.notify)
    schedules: tuple[ScheduleSpec, ...] = ()
    # A template over `input` naming the run's key, and how many runs of one key may
    # run at once (None: not stated, which means 1 when there is a key).
    concurrency_key: str | None = None
    max_runs_per_key: int | None = None


class _StepDraft:
    """A StepSpec under construction: the same slots, but not frozen, so ``new_step``
    fills them with plain attribute stores and then makes it a StepSpec (assigning
    ``__class__`` is allowed between classes with identical slots).  A frozen
    dataclass's __init__ calls object.__setattr__ once per field instead, which makes
    100,000 steps built in Python cost 0.15 s more (benchmarks/child.py chain:10000:
    validate_s 0.073 s with the swap, 0.093 s without)."""

    __slots__ = StepSpec.__slots__


_STEP_FIELDS = ("id", "type", "config", "depends_on", "when", "trigger", "retry", "timeout",
                "fallback", "allow_failure", "outputs", "circuit_breaker", "pool",
                "description", "then", "else_", "func", "item", "cache")
if StepSpec.__slots__ != _STEP_FIELDS:  # checked at import, also under python -O
    raise RuntimeError("new_step must set every StepSpec field, in order")


def new_step(*, id: str, type: str, config: Mapping[str, JSON] | None = None,
             depends_on: tuple[str, ...] = (), when: str | None = None,
             trigger: Trigger = "default", retry: RetryPolicy = DEFAULT_RETRY,
             timeout: float | None = None, fallback: Fallback | None = None,
             allow_failure: bool = False, outputs: tuple[str, ...] = (),
             circuit_breaker: CircuitBreakerSpec | None = None, pool: str | None = None,
             description: str | None = None, then: tuple[str, ...] = (),
             else_: tuple[str, ...] = (), func: Callable[..., object] | None = None,
             item: StepSpec | None = None,
             cache: CacheSpec | None = None) -> StepSpec:
    """``StepSpec(...)``, same fields and defaults (an omitted config is a new empty
    dict), for code that builds many steps: 4x faster."""
    step: Any = _StepDraft()
    step.id = id
    step.type = type
    step.config = {} if config is None else config
    step.depends_on = depends_on
    step.when = when
    step.trigger = trigger
    step.retry = retry
    step.timeout = timeout
    step.fallback = fallback
    step.allow_failure = allow_failure
    step.outputs = outputs
    step.circuit_breaker = circuit_breaker
    step.pool = pool
    step.description = description
    step.then = then
    step.else_ = else_
    step.func = func
    step.item = item
    step.cache = cache
    step.__class__ = StepSpec
    return cast(StepSpec, step)
