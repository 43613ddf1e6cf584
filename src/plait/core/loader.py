"""Turn a parsed definition (dict from YAML, JSON or ``Workflow.to_dict``) into the model.

``parse_definition`` checks the shape of every field and collects Problems instead of
stopping at the first; graph-level rules live in ``validate``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import TypeVar, cast

from ..errors import Problem
from .durations import parse_duration
from .extension_keys import is_extension
from .model import (
    DEFAULT_CONCURRENCY,
    DEFAULT_RETRY,
    JSON,
    REDUCERS,
    TRIGGERS,
    CacheSpec,
    CircuitBreakerSpec,
    Fallback,
    JSONDict,
    Limits,
    OnFailure,
    PoolSpec,
    Rate,
    RetryPolicy,
    StepSpec,
    Trigger,
    WorkflowSpec,
    new_step,
)
from .numbers import MAX_BACKOFF, MAX_INT, MAX_JITTER, real, shown, whole
from .reducers import reducer_hint, unknown_reducer
from .schedule_check import parse_schedules
from .sizes import parse_size
from .step_defaults import StepDefaults, merge, parse_defaults, type_config
from .steptypes import known_types, type_info, types_with_field
from .suggest import did_you_mean

# a name plait gives a definition written at run time adds `.STEP` per level
# (`planner.execute`, docs/subworkflows.md)
WORKFLOW_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}(?:\.[A-Za-z_][A-Za-z0-9_]{0,63})*$")
STEP_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")

TOP_FIELDS = ("name", "version", "description", "input", "concurrency", "on_failure",
              "timeout", "sla", "defaults", "pools", "output", "steps", "reducers",
              "limits", "alerts", "schedules", "concurrency_key", "max_runs_per_key",
              "notify")
STEP_FIELDS = ("id", "type", "depends_on", "when", "trigger", "retry", "timeout",
               "fallback", "allow_failure", "outputs", "circuit_breaker", "pool",
               "description", "cache")
DEFAULTABLE = ("retry", "timeout", "trigger", "pool", "circuit_breaker", "allow_failure")
RETRY_FIELDS = ("max_retries", "initial_delay", "backoff", "max_delay", "jitter",
                "retry_on", "no_retry_on")

T = TypeVar("T")


class _Collector:
    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def add(self, location: str, message: str, hint: str | None = None) -> None:
        self.problems.append(Problem(location=location, message=message, hint=hint))

    def get(self, where: str, value: JSON, convert: Callable[[JSON], T], default: T) -> T:
        """Convert a field, recording a problem (and returning the default) on error."""
        try:
            return convert(value)
        except (ValueError, TypeError) as exc:
            self.add(where, str(exc))
            return default


def _duration(value: JSON) -> float:
    return parse_duration(value)


def _opt_duration(value: JSON) -> float | None:
    return None if value is None else parse_duration(value)


def _int(low: int) -> Callable[[JSON], int]:
    """A whole number from ``low`` to ``MAX_INT`` (what every store keeps)."""
    return functools.partial(whole, low=low)


def _number(low: float, high: float) -> Callable[[JSON], float]:
    return functools.partial(real, low=low, high=high)


def _bool(value: JSON) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected true or false, got {value!r}")
    return value


def _str(value: JSON) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r}")
    return value


def _names(value: JSON) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        hint = ""
        if isinstance(value, bool) or (isinstance(value, list)
                                       and any(isinstance(v, bool) for v in value)):
            hint = " (YAML reads unquoted yes/no/on/off/true/false as booleans: quote them)"
        raise TypeError(f"expected a list of names, got {value!r}{hint}")
    return tuple(cast(list[str], value))


def parse_rate(value: JSON) -> Rate:
    """``60/min``, ``10/s``, ``1000/h`` or ``5/30s``."""
    if not isinstance(value, str) or "/" not in value:
        raise ValueError(f"expected a rate like '60/min' or '10/s', got {value!r}")
    count_text, per = value.split("/", 1)
    try:
        count = int(count_text.strip())
    except ValueError:
        raise ValueError(f"rate {value!r}: {count_text!r} is not a whole number") from None
    per = per.strip()
    period = parse_duration(f"1{per}" if per in ("s", "min", "m", "h", "d") else per)
    if count < 1 or period <= 0:
        raise ValueError(f"rate {value!r} must allow at least 1 per positive period")
    if count > MAX_INT:
        raise ValueError(f"rate {shown(value)}: at most {MAX_INT:,} per period")
    return Rate(count=count, period=period)


def _unknown_fields(c: _Collector, where: str, data: Mapping[str, JSON],
                    known: tuple[str, ...] | frozenset[str], what: str) -> None:
    for key in data:
        if key not in known and not is_extension(key):
            c.add(f"{where}.{key}" if where else key, f"unknown field for {what}",
                  did_you_mean(key, known))


def _unknown_step_fields(c: _Collector, where: str, data: Mapping[str, JSON],
                         known: frozenset[str], stype: str) -> None:
    """Like ``_unknown_fields``, with a hint naming the step types that have a field
    this type lacks (``executor`` on an http step: a field of python steps)."""
    for key in data:
        if key in known or is_extension(key):
            continue
        owners = types_with_field(key)
        hint = did_you_mean(key, known) or (
            f"{key!r} is a field of {', '.join(owners)} steps only" if owners else None)
        c.add(f"{where}.{key}", f"unknown field for a {stype} step", hint)


def parse_definition(raw: object) -> tuple[WorkflowSpec | None, list[Problem]]:
    """The model of ``raw`` and every problem found; the model is None when the shape is
    too broken to build one (not a mapping, no steps list)."""
    c = _Collector()
    if not isinstance(raw, dict):
        c.add("", f"a workflow definition must be a mapping, got {type(raw).__name__}")
        return None, c.problems
    data = cast(JSONDict, raw)
    _unknown_fields(c, "", data, TOP_FIELDS, "a workflow")
    name = data.get("name")
    if not isinstance(name, str) or not WORKFLOW_NAME.match(name):
        c.add("name", f"invalid workflow name {name!r}",
              "use lowercase letters, digits, '_' and '-', starting with a letter or digit, "
              "at most 64 characters")
        name = name if isinstance(name, str) else "invalid"
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        c.add("steps", "a workflow needs a non-empty list of steps")
        return None, c.problems
    defaults, problems = parse_defaults(data.get("defaults"), DEFAULTABLE)
    c.problems += problems
    steps = tuple(_parse_step(c, i, s, defaults) for i, s in enumerate(raw_steps))
    schedules, problems = parse_schedules(data.get("schedules"))
    c.problems += problems
    spec = WorkflowSpec(
        name=name,
        steps=steps,
        version=c.get("version", data["version"], _int(1), None) if "version" in data
        else None,
        description=_opt_str(c, "description", data.get("description")),
        input_schema=_input_schema(c, data.get("input")),
        concurrency=c.get("concurrency", data.get("concurrency", DEFAULT_CONCURRENCY),
                          _int(1), DEFAULT_CONCURRENCY),
        on_failure=_on_failure(c, data.get("on_failure", "continue")),
        timeout=c.get("timeout", data.get("timeout"), _opt_duration, None),
        sla=c.get("sla", data.get("sla"), _opt_duration, None),
        pools=_pools(c, data.get("pools") or {}),
        reducers=_reducers(c, data.get("reducers") or {}),
        output=data.get("output"),
        limits=_limits(c, data.get("limits") or {}),
        alerts=c.get("alerts", data.get("alerts") or [], _names, ()),
        notify=data.get("notify"),  # checked by plait.definitions (observe.notify)
        schedules=schedules,
        concurrency_key=_opt_str(c, "concurrency_key", data.get("concurrency_key")),
        max_runs_per_key=c.get("max_runs_per_key", data["max_runs_per_key"], _int(1), None)
        if data.get("max_runs_per_key") is not None else None,
    )
    return spec, c.problems


def _opt_str(c: _Collector, where: str, value: JSON) -> str | None:
    return None if value is None else c.get(where, value, _str, None)


def _input_schema(c: _Collector, value: JSON) -> JSONDict | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        c.add("input", "expected a JSON Schema mapping")
        return None
    return value


def _on_failure(c: _Collector, value: JSON) -> OnFailure:
    if value not in ("continue", "fail_fast"):
        c.add("on_failure", f"expected 'continue' or 'fail_fast', got {value!r}")
        return "continue"
    return cast(OnFailure, value)


def _pools(c: _Collector, value: JSON) -> dict[str, PoolSpec]:
    if not isinstance(value, dict):
        c.add("pools", "expected a mapping of pool names to {concurrency, rate}")
        return {}
    pools: dict[str, PoolSpec] = {}
    for pname, body in value.items():
        where = f"pools.{pname}"
        if not isinstance(body, dict):
            c.add(where, "expected a mapping with 'concurrency' and/or 'rate'")
            continue
        _unknown_fields(c, where, body, ("concurrency", "rate"), "a pool")
        conc = body.get("concurrency")
        rate = body.get("rate")
        pools[pname] = PoolSpec(
            name=pname,
            concurrency=None if conc is None else c.get(f"{where}.concurrency", conc,
                                                        _int(1), None),
            rate=None if rate is None else c.get(f"{where}.rate", rate, parse_rate, None),
        )
    return pools


def _reducers(c: _Collector, value: JSON) -> dict[str, str]:
    if not isinstance(value, dict):
        c.add("reducers", "expected a mapping of state keys to reducer names")
        return {}
    out: dict[str, str] = {}
    for key, reducer in value.items():
        if reducer not in REDUCERS:
            c.add(f"reducers.{key}", unknown_reducer(reducer), reducer_hint(reducer))
        else:
            out[key] = str(reducer)
    return out


def _limits(c: _Collector, value: JSON) -> Limits:
    if not isinstance(value, dict):
        c.add("limits", "expected a mapping")
        return Limits()
    known = ("max_steps", "max_depth", "max_map_items", "max_subworkflow_depth",
             "max_output_bytes", "max_llm_tokens")
    _unknown_fields(c, "limits", value, known, "limits")
    base = Limits()
    kwargs = {k: c.get(f"limits.{k}", value[k],
                       parse_size if k == "max_output_bytes" else _int(1), getattr(base, k))
              for k in known if k in value}
    return Limits(**kwargs)


@functools.lru_cache(maxsize=64)
def _allowed_fields(type_fields: frozenset[str]) -> frozenset[str]:
    return frozenset(STEP_FIELDS) | type_fields


# fields of a step that an inline step (a map's `step`) may not have: it runs once per
# item, in the map's place in the graph
INLINE_EXCLUDED = ("id", "depends_on", "when", "trigger", "outputs")


def _parse_inline(c: _Collector, where: str, raw: JSON, defaults: StepDefaults,
                  map_id: str) -> StepSpec | None:
    """A map step's ``step``: parsed like a step of its own (defaults apply), named
    ``ID[]`` (each item is ``ID[INDEX]``)."""
    if raw is None:
        return None  # reported as a missing field by validation
    if not isinstance(raw, dict):
        c.add(where, f"a map's step must be a mapping, got {type(raw).__name__}")
        return None
    for name in INLINE_EXCLUDED:
        if name in raw:
            c.add(f"{where}.{name}", f"an inline step has no {name!r} (step {map_id!r}): "
                  "it runs once per item, in the map's place in the graph")
    body = {k: v for k, v in raw.items() if k not in INLINE_EXCLUDED}
    body["id"] = f"{map_id}[]"
    return _parse_step_at(c, where, body, defaults)


def _with_defaults(raw: JSON, defaults: StepDefaults) -> JSON:
    """A map's inline step with the defaults it takes written into it: the canonical
    form (what is stored, and loaded again with no ``defaults:``) says what runs."""
    stype = raw.get("type") if isinstance(raw, dict) else None
    if not isinstance(raw, dict) or not isinstance(stype, str):
        return raw
    layer = defaults.of(stype)
    if not layer:
        return raw
    return {k: v for k, v in merge(layer, raw).items() if k not in INLINE_EXCLUDED
            or k in raw}


def parse_inline(where: str, raw: JSON, map_id: str) -> tuple[StepSpec | None, list[Problem]]:
    """A map's inline step built in Python: its StepSpec and the problems found."""
    c = _Collector()
    return _parse_inline(c, where, raw, StepDefaults(), map_id), c.problems


def _parse_step(c: _Collector, i: int, raw: JSON, defaults: StepDefaults) -> StepSpec:
    return _parse_step_at(c, f"steps[{i}]", raw, defaults, i)


def _parse_step_at(c: _Collector, where: str, raw: JSON, defaults: StepDefaults,
                   i: int = 0) -> StepSpec:
    if not isinstance(raw, dict):
        c.add(where, f"a step must be a mapping, got {type(raw).__name__}")
        return StepSpec(id=f"__invalid_{i}", type="invalid")
    sid = raw.get("id")
    if not isinstance(sid, str):
        c.add(f"{where}.id", "missing step id" if sid is None else f"invalid id {sid!r}")
        sid = f"__invalid_{i}"
    stype = raw.get("type")
    if not isinstance(stype, str):
        c.add(f"{where}.type", f"step {sid!r} has no type",
              f"one of {', '.join(known_types())}")
        stype = "invalid"
    info = type_info(stype)
    type_fields = info.fields if info else frozenset()
    if info is not None:
        _unknown_step_fields(c, where, raw, _allowed_fields(type_fields), stype)
    layer = defaults.of(stype)
    merged = merge(layer, raw)  # `raw` itself when there are no defaults
    config = type_config(raw, merged, layer, type_fields) if layer \
        else {k: v for k, v in raw.items() if k in type_fields}
    then: tuple[str, ...] = ()
    else_: tuple[str, ...] = ()
    if stype == "condition":
        empty: tuple[str, ...] = ()
        then = c.get(f"{where}.then", config.pop("then", []), _names, empty)
        else_ = c.get(f"{where}.else", config.pop("else", []), _names, empty)
    trigger = merged.get("trigger", "default")
    if trigger not in TRIGGERS:
        c.add(f"{where}.trigger", f"unknown trigger rule {trigger!r}",
              did_you_mean(str(trigger), TRIGGERS) or f"one of {', '.join(TRIGGERS)}")
        trigger = "default"
    when = merged.get("when")
    if when is not None and not isinstance(when, str | bool):
        c.add(f"{where}.when", f"expected a template string, got {when!r}")
        when = None
    item = None
    if stype == "map":
        item = _parse_inline(c, f"{where}.step", config.get("step"), defaults, sid)
        config["step"] = _with_defaults(config.get("step"), defaults)
    return new_step(
        id=sid,
        type=stype,
        config=config,
        # a field that is absent takes its default without a conversion (and without
        # formatting its location): large definitions set few fields per step
        depends_on=c.get(f"{where}.depends_on", raw["depends_on"], _names, ())
        if "depends_on" in raw else (),
        when=None if when is None else (when if isinstance(when, str) else str(when).lower()),
        trigger=cast(Trigger, trigger),
        retry=_retry(c, f"{where}.retry", merged["retry"])
        if "retry" in merged else DEFAULT_RETRY,
        timeout=c.get(f"{where}.timeout", merged["timeout"], _opt_duration, None)
        if "timeout" in merged else None,
        fallback=_fallback(c, f"{where}.fallback", merged["fallback"])
        if "fallback" in merged else None,
        allow_failure=c.get(f"{where}.allow_failure", merged["allow_failure"], _bool, False)
        if "allow_failure" in merged else False,
        outputs=c.get(f"{where}.outputs", raw["outputs"], _names, ())
        if "outputs" in raw else (),
        circuit_breaker=_breaker(c, f"{where}.circuit_breaker", merged["circuit_breaker"])
        if "circuit_breaker" in merged else None,
        pool=_opt_str(c, f"{where}.pool", merged["pool"]) if "pool" in merged else None,
        description=_opt_str(c, f"{where}.description", raw["description"])
        if "description" in raw else None,
        then=then,
        else_=else_,
        item=item,
        cache=_cache(c, f"{where}.cache", raw["cache"]) if "cache" in raw else None,
    )


def _cache(c: _Collector, where: str, value: JSON) -> CacheSpec | None:
    """``cache: {key: "{{ ... }}", ttl: 1h}``: both required."""
    if not isinstance(value, dict):
        c.add(where, "expected {key: \"{{ ... }}\", ttl: duration}")
        return None
    _unknown_fields(c, where, value, ("key", "ttl"), "cache")
    key = value.get("key")
    if not isinstance(key, str) or not key:
        c.add(f"{where}.key", "a cache needs `key`: a template (or text) naming what the "
                              "result depends on, e.g. \"{{ input.url }}\""
              if key is None else f"expected a template string, got {key!r}")
        key = None
    if "ttl" not in value:
        c.add(f"{where}.ttl", "a cache needs `ttl`: how long a result is reused (e.g. 1h)")
        return None
    ttl = c.get(f"{where}.ttl", value["ttl"], _duration, None)
    if ttl is not None and ttl <= 0:
        c.add(f"{where}.ttl", f"expected a duration above zero, got {value['ttl']!r}")
        return None
    if key is None or ttl is None:
        return None
    return CacheSpec(key=key, ttl=ttl)


def _retry(c: _Collector, where: str, value: JSON) -> RetryPolicy:
    if value is None:
        return RetryPolicy()
    if isinstance(value, int) and not isinstance(value, bool):
        return RetryPolicy(max_retries=c.get(where, value, _int(0), 3))
    if not isinstance(value, dict):
        c.add(where, f"expected a mapping of {', '.join(RETRY_FIELDS)}")
        return RetryPolicy()
    _unknown_fields(c, where, value, RETRY_FIELDS, "retry")
    base = RetryPolicy()
    return RetryPolicy(
        max_retries=c.get(f"{where}.max_retries", value.get("max_retries", base.max_retries),
                          _int(0), base.max_retries),
        initial_delay=c.get(f"{where}.initial_delay",
                            value.get("initial_delay", base.initial_delay), _duration,
                            base.initial_delay),
        backoff=c.get(f"{where}.backoff", value.get("backoff", base.backoff),
                      _number(1.0, MAX_BACKOFF), base.backoff),
        max_delay=c.get(f"{where}.max_delay", value.get("max_delay", base.max_delay),
                        _duration, base.max_delay),
        jitter=c.get(f"{where}.jitter", value.get("jitter", base.jitter),
                     _number(0.0, MAX_JITTER), base.jitter),
        retry_on=c.get(f"{where}.retry_on", value.get("retry_on", []), _names, ()),
        no_retry_on=c.get(f"{where}.no_retry_on", value.get("no_retry_on", []), _names, ()),
    )


def _fallback(c: _Collector, where: str, value: JSON) -> Fallback | None:
    if value is None:
        return None
    if not isinstance(value, dict) or len(value) != 1 or not (
            "call" in value or "output" in value):
        c.add(where, "expected {call: module:function} or {output: <value>}")
        return None
    if "call" in value:
        call = value["call"]
        if not isinstance(call, str) or ":" not in call:
            c.add(f"{where}.call", f"expected 'module:function', got {call!r}")
            return None
        return Fallback(call=call)
    return Fallback(output=value["output"])


def _breaker(c: _Collector, where: str, value: JSON) -> CircuitBreakerSpec | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("key"), str):
        c.add(where, "expected {key: name, failure_threshold: N, reset_after: duration}")
        return None
    _unknown_fields(c, where, value, ("key", "failure_threshold", "reset_after"),
                    "circuit_breaker")
    return CircuitBreakerSpec(
        key=cast(str, value["key"]),
        failure_threshold=c.get(f"{where}.failure_threshold",
                                value.get("failure_threshold", 5), _int(1), 5),
        reset_after=c.get(f"{where}.reset_after", value.get("reset_after", 60.0),
                          _duration, 60.0),
    )
