"""The canonical dict form of a workflow and its fingerprint."""

from __future__ import annotations

import hashlib
import json
from dataclasses import fields

from .model import (
    DEFAULT_RETRY,
    JSON,
    JSONDict,
    Limits,
    RetryPolicy,
    ScheduleSpec,
    StepSpec,
    WorkflowSpec,
)
from .steptypes import traits_of

_RETRY_DEFAULT = DEFAULT_RETRY
_LIMITS_DEFAULT = Limits()


def step_to_dict(step: StepSpec) -> JSONDict:
    out: JSONDict = {"id": step.id, "type": step.type}
    out.update(dict(step.config))
    if traits_of(step.type).branches:
        out["then"] = list(step.then)
        out["else"] = list(step.else_)
    if step.depends_on:
        out["depends_on"] = list(step.depends_on)
    if step.when is not None:
        out["when"] = step.when
    if step.trigger != "default":
        out["trigger"] = step.trigger
    retry = _retry_to_dict(step.retry)
    if retry:
        out["retry"] = retry
    if step.timeout is not None:
        out["timeout"] = step.timeout
    if step.fallback is not None:
        out["fallback"] = ({"call": step.fallback.call} if step.fallback.call
                           else {"output": step.fallback.output})
    if step.allow_failure:
        out["allow_failure"] = True
    if step.outputs:
        out["outputs"] = list(step.outputs)
    if step.circuit_breaker is not None:
        cb = step.circuit_breaker
        out["circuit_breaker"] = {"key": cb.key, "failure_threshold": cb.failure_threshold,
                                  "reset_after": cb.reset_after}
    if step.pool is not None:
        out["pool"] = step.pool
    if step.description:
        out["description"] = step.description
    if step.cache is not None:
        out["cache"] = {"key": step.cache.key, "ttl": step.cache.ttl}
    return out


def _retry_to_dict(retry: RetryPolicy) -> JSONDict:
    if retry is _RETRY_DEFAULT or retry == _RETRY_DEFAULT:
        return {}
    out: JSONDict = {}
    for f in fields(RetryPolicy):
        value = getattr(retry, f.name)
        if value != getattr(_RETRY_DEFAULT, f.name):
            out[f.name] = list(value) if isinstance(value, tuple) else value
    return out


def workflow_to_dict(spec: WorkflowSpec) -> JSONDict:
    """The definition as plain JSON: loading it back gives an equal model."""
    out: JSONDict = {"name": spec.name}
    if spec.version is not None:
        out["version"] = spec.version
    if spec.description:
        out["description"] = spec.description
    if spec.input_schema is not None:
        out["input"] = spec.input_schema
    if spec.concurrency != WorkflowSpec.__dataclass_fields__["concurrency"].default:
        out["concurrency"] = spec.concurrency
    if spec.on_failure != "continue":
        out["on_failure"] = spec.on_failure
    if spec.timeout is not None:
        out["timeout"] = spec.timeout
    if spec.sla is not None:
        out["sla"] = spec.sla
    if spec.pools:
        pools: JSONDict = {}
        for name, pool in spec.pools.items():
            body: JSONDict = {}
            if pool.concurrency is not None:
                body["concurrency"] = pool.concurrency
            if pool.rate is not None:
                body["rate"] = str(pool.rate)
            pools[name] = body
        out["pools"] = pools
    if spec.reducers:
        out["reducers"] = dict(spec.reducers)
    if spec.output is not None:
        out["output"] = spec.output
    limits = {f.name: getattr(spec.limits, f.name) for f in fields(Limits)
              if getattr(spec.limits, f.name) != getattr(_LIMITS_DEFAULT, f.name)}
    if limits:
        out["limits"] = dict(limits)
    if spec.alerts:
        out["alerts"] = list(spec.alerts)
    if spec.notify is not None:
        out["notify"] = spec.notify
    if spec.schedules:
        out["schedules"] = [_schedule_to_dict(s) for s in spec.schedules]
    if spec.concurrency_key is not None:
        out["concurrency_key"] = spec.concurrency_key
    if spec.max_runs_per_key is not None:
        out["max_runs_per_key"] = spec.max_runs_per_key
    out["steps"] = [step_to_dict(s) for s in spec.steps]
    return out


def _schedule_to_dict(schedule: ScheduleSpec) -> JSONDict:
    out: JSONDict = {"cron": schedule.cron}
    if schedule.timezone != "UTC":
        out["timezone"] = schedule.timezone
    if schedule.input != {}:
        out["input"] = schedule.input
    if schedule.catch_up != "skip":
        out["catch_up"] = schedule.catch_up
    return out


def canonical_json(value: JSON) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def fingerprint(spec: WorkflowSpec) -> str:
    return fingerprint_of(workflow_to_dict(spec))


def fingerprint_of(definition: JSONDict) -> str:
    """First 12 hex digits of the SHA-256 of the canonical JSON (version excluded, so
    stating a version does not change what the definition is)."""
    body = {k: v for k, v in definition.items() if k != "version"}
    return hashlib.sha256(canonical_json(body).encode()).hexdigest()[:12]
