"""Alert rules over metrics: ``plait metrics --check`` exits 1 when any rule fires.

Grammar (one rule per string; whitespace is free)::

    rule      := [ "step" STEP_ID ":" ] METRIC OP THRESHOLD
    OP        := "<" | "<=" | ">" | ">=" | "==" | "!="
    THRESHOLD := NUMBER                 counts and plain numbers
               | NUMBER | NUMBER "%"    rates (0.8 and 80% are the same)
               | NUMBER | DURATION      durations: seconds, or "500ms", "30s", "5m", "1h30m"

    success_rate < 0.8            p95 > 30s            retries_per_run > 2
    failures >= 3                 step fetch: p95 > 2s
    step fetch: success_rate < 95%          step fetch: retries_per_execution > 1

Metrics of a workflow (durations are of whole runs)::

    runs completed failures (= failed) cancelled fallbacks        counts
    success_rate failure_rate                                       rates
    p50 p95 p99 mean max                                            durations
    compute_p50 compute_p95 compute_p99 compute_mean compute_max    compute time
    retries_per_run                                                 number

Metrics of a step (``step ID:`` rules; ``step ID[*]:`` for the items of map ``ID``)::

    executions completed failures (= failed) cancelled attempts retries fallbacks
    success_rate failure_rate
    p50 p95 p99 mean max                  step duration (first start to finish, retries included)
    attempt_p50 attempt_p95 attempt_p99 attempt_mean attempt_max       one attempt
    compute_p50 compute_p95 compute_p99 compute_mean compute_max       one attempt, waits excluded
    retries_per_execution

Their meaning is defined once, in ``metrics.py``.  A rule whose metric has no value (no
finished run yet, or a step that never executed) does not fire.

Where rules come from:

- a workflow definition: ``alerts: [...]`` (``WorkflowSpec.alerts``), applying to that
  workflow: ``parse_rules(spec.alerts, workflow=spec.name)``, or for stored definitions
  ``await stored_rules(store, names)``;
- a YAML config file: ``alerts: {workflow_name: [rules...], "*": [rules...]}`` where
  ``"*"`` applies to every workflow: ``load_rules(path)`` / ``rules_from_config(data)``.

Then ``evaluate(report, rules) -> list[Firing]`` (pure), ``render_firings(firings)`` and
``firings_to_json(firings)``::

    {"fired": bool, "firings": [{"rule": str, "source": str | null, "workflow": str,
      "step": str | null, "metric": str, "op": str, "observed": float,
      "threshold": float}]}

A bad rule raises ``DefinitionError`` with one ``Problem`` per bad rule, each naming the
rule, where it came from and the fix (``did you mean 'p95'?``); ``check_rules`` returns
those problems instead, for validation.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Generic, TypeVar

import yaml

from ..core.durations import format_duration, parse_duration
from ..core.model import JSONDict
from ..core.suggest import did_you_mean
from ..errors import DefinitionError, Problem, WorkflowNotFound
from ..store.base import Store
from .metrics import MetricsReport, StepMetrics, Summary, WorkflowMetrics

__all__ = ["STEP_METRICS", "WORKFLOW_METRICS", "AlertRule", "Firing", "Kind", "check_rules",
           "evaluate", "firings_to_json", "format_value", "load_rules", "parse_rule",
           "parse_rules", "render_firings", "rules_from_config", "stored_rules"]

EVERY_WORKFLOW = "*"


class Kind(Enum):
    """What a metric measures, which decides how its threshold is read and shown."""

    COUNT = "count"
    RATE = "rate"
    DURATION = "duration"
    NUMBER = "number"


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Metric(Generic[T]):
    kind: Kind
    read: Callable[[T], float | None]


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _summary_field(get: Callable[[T], Summary], name: str) -> _Metric[T]:
    def read(subject: T) -> float | None:
        value: float | None = getattr(get(subject), name)
        return value

    return _Metric(Kind.DURATION, read)


def _summary_metrics(get: Callable[[T], Summary], prefix: str = "") -> dict[str, _Metric[T]]:
    """p50, p95, p99, mean and max of one duration summary."""
    return {prefix + name: _summary_field(get, name)
            for name in ("p50", "p95", "p99", "mean", "max")}


def _finished(m: WorkflowMetrics | StepMetrics) -> int:
    failed = m.failed if isinstance(m, WorkflowMetrics) else m.failures
    return m.completed + failed + m.cancelled


WORKFLOW_METRICS: Mapping[str, _Metric[WorkflowMetrics]] = {
    "runs": _Metric(Kind.COUNT, lambda w: w.runs),
    "completed": _Metric(Kind.COUNT, lambda w: w.completed),
    "failures": _Metric(Kind.COUNT, lambda w: w.failed),
    "failed": _Metric(Kind.COUNT, lambda w: w.failed),
    "cancelled": _Metric(Kind.COUNT, lambda w: w.cancelled),
    "fallbacks": _Metric(Kind.COUNT, lambda w: w.fallbacks),
    "success_rate": _Metric(Kind.RATE, lambda w: w.success_rate),
    "failure_rate": _Metric(Kind.RATE, lambda w: _rate(w.failed, _finished(w))),
    "retries_per_run": _Metric(Kind.NUMBER, lambda w: w.retries_per_run),
    **_summary_metrics(lambda w: w.duration),
    **_summary_metrics(lambda w: w.compute, "compute_"),
}

STEP_METRICS: Mapping[str, _Metric[StepMetrics]] = {
    "executions": _Metric(Kind.COUNT, lambda s: s.executions),
    "completed": _Metric(Kind.COUNT, lambda s: s.completed),
    "failures": _Metric(Kind.COUNT, lambda s: s.failures),
    "failed": _Metric(Kind.COUNT, lambda s: s.failures),
    "cancelled": _Metric(Kind.COUNT, lambda s: s.cancelled),
    "attempts": _Metric(Kind.COUNT, lambda s: s.attempts),
    "retries": _Metric(Kind.COUNT, lambda s: s.retries),
    "fallbacks": _Metric(Kind.COUNT, lambda s: s.fallbacks),
    "success_rate": _Metric(Kind.RATE, lambda s: s.success_rate),
    "failure_rate": _Metric(Kind.RATE, lambda s: _rate(s.failures, _finished(s))),
    "retries_per_execution": _Metric(Kind.NUMBER, lambda s: s.retries_per_execution),
    **_summary_metrics(lambda s: s.duration),
    **_summary_metrics(lambda s: s.attempt_duration, "attempt_"),
    **_summary_metrics(lambda s: s.compute, "compute_"),
}

_OPS: Mapping[str, Callable[[float, float], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": operator.eq, "!=": operator.ne}

_STEP_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}(\[\*\])?")  # fetch, or its items
_SCOPE = re.compile(r"step\s+(?P<step>[^:]*?)\s*:(?P<rest>.*)", re.DOTALL)
_COMPARISON = re.compile(r"(?P<metric>[^<>=!\s]*)\s*(?P<op><=|>=|==|!=|<|>|=)\s*(?P<value>.*)",
                         re.DOTALL)
_EXAMPLE = "e.g. 'p95 > 30s' or 'step fetch: success_rate < 0.9'"


@dataclass(frozen=True, slots=True, kw_only=True)
class AlertRule:
    """One parsed rule.  ``workflow`` None applies it to every workflow; ``step`` None
    makes it a workflow rule.  ``threshold`` is in the metric's unit (seconds, a rate in
    [0, 1], a count).  ``source`` says where the rule was written (for messages)."""

    text: str
    metric: str
    op: str
    threshold: float
    workflow: str | None = None
    step: str | None = None
    source: str | None = None

    @property
    def kind(self) -> Kind:
        table = STEP_METRICS if self.step is not None else WORKFLOW_METRICS
        return table[self.metric].kind

    def observe(self, subject: WorkflowMetrics | StepMetrics) -> float | None:
        """The rule's metric read from ``subject`` (a step's metrics for step rules)."""
        if isinstance(subject, StepMetrics):
            return STEP_METRICS[self.metric].read(subject)
        return WORKFLOW_METRICS[self.metric].read(subject)

    def holds(self, observed: float) -> bool:
        return _OPS[self.op](observed, self.threshold)


@dataclass(frozen=True, slots=True, kw_only=True)
class Firing:
    """A rule that fired: which rule, on which workflow (and step), the value seen."""

    rule: AlertRule
    workflow: str
    step: str | None
    observed: float

    @property
    def threshold(self) -> float:
        return self.rule.threshold

    def message(self) -> str:
        where = self.workflow + (f" step {self.step}" if self.step else "")
        value = format_value(self.rule.kind, self.observed)
        limit = format_value(self.rule.kind, self.threshold)
        return (f"{where}: {self.rule.metric} is {value}, "
                f"{self.rule.op} {limit} (rule {self.rule.text!r})")

    def to_json(self) -> JSONDict:
        return {"rule": self.rule.text, "source": self.rule.source,
                "workflow": self.workflow, "step": self.step, "metric": self.rule.metric,
                "op": self.rule.op, "observed": self.observed, "threshold": self.threshold}


def format_value(kind: Kind, value: float) -> str:
    if kind is Kind.DURATION:
        return format_duration(value)
    if kind is Kind.RATE:
        return f"{value * 100:.1f}%"
    if kind is Kind.COUNT and value == int(value):
        return str(int(value))
    return f"{value:.2f}"


# ------------------------------------------------------------------------ parsing


class _RuleProblem(Exception):
    """Internal: one thing wrong with one rule (becomes a Problem)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


def _split_scope(text: str) -> tuple[str | None, str]:
    if not re.match(r"step\b", text):
        return None, text
    match = _SCOPE.fullmatch(text)
    if match is None:
        raise _RuleProblem("a step rule needs ':' after the step id",
                           "write it like 'step fetch: p95 > 2s'")
    step = match.group("step")
    if not _STEP_ID.fullmatch(step):
        raise _RuleProblem(f"{step!r} is not a step id",
                           "write it like 'step fetch: p95 > 2s'")
    return step, match.group("rest").strip()


def _metric_kind(name: str, step: str | None) -> Kind:
    """The kind of metric ``name`` in the rule's scope, or a problem naming the metrics
    of that scope (a name valid only in the other scope is called out as such)."""
    kinds = {k: m.kind for k, m in (STEP_METRICS if step is not None
                                    else WORKFLOW_METRICS).items()}
    if name in kinds:
        return kinds[name]
    scope, other = ("step", WORKFLOW_METRICS) if step is not None else ("workflow",
                                                                         STEP_METRICS)
    hint = did_you_mean(name, kinds) or f"one of {', '.join(sorted(kinds))}"
    if name in other:
        raise _RuleProblem(f"{name!r} is not a {scope} metric", hint)
    raise _RuleProblem(f"unknown {scope} metric {name!r}", hint)


def _threshold(text: str, kind: Kind) -> float:
    if not text:
        raise _RuleProblem("missing threshold after the operator", _EXAMPLE)
    if kind is Kind.DURATION:
        try:
            return parse_duration(text)
        except ValueError as exc:
            raise _RuleProblem(f"bad duration threshold {text!r}",
                               "use seconds or a duration like '500ms', '30s', '5m'") from exc
    percent = kind is Kind.RATE and text.endswith("%")
    try:
        value = float(text[:-1] if percent else text)
    except ValueError as exc:
        unit = "a rate like 0.8 or 80%" if kind is Kind.RATE else "a number"
        raise _RuleProblem(f"bad threshold {text!r}", f"expected {unit}") from exc
    value = value / 100 if percent else value
    if kind is Kind.RATE and not 0.0 <= value <= 1.0:
        raise _RuleProblem(f"a rate threshold must be between 0 and 1 (or 0% and 100%), "
                           f"got {text!r}")
    return value


def _parse(text: str, workflow: str | None, source: str | None) -> AlertRule:
    body = text.strip()
    if not body:
        raise _RuleProblem("empty rule", _EXAMPLE)
    step, rest = _split_scope(body)
    match = _COMPARISON.fullmatch(rest)
    if match is None:
        raise _RuleProblem("expected METRIC OP THRESHOLD", _EXAMPLE)
    metric, op = match.group("metric"), match.group("op")
    if not metric:
        raise _RuleProblem("missing metric name before the operator", _EXAMPLE)
    if op == "=":
        raise _RuleProblem("unknown operator '='", "use '==' to compare for equality")
    kind = _metric_kind(metric, step)
    return AlertRule(text=body, metric=metric, op=op,
                     threshold=_threshold(match.group("value").strip(), kind),
                     workflow=workflow, step=step, source=source)


def _problem(location: str, text: object, exc: _RuleProblem) -> Problem:
    return Problem(location=location, message=f"alert rule {text!r}: {exc.message}",
                   hint=exc.hint)


def parse_rule(text: str, *, workflow: str | None = None,
               source: str | None = None) -> AlertRule:
    """One rule; DefinitionError (one Problem naming the rule and the fix) if invalid.
    ``source`` (kept in the rule) says where it was written."""
    try:
        return _parse(text, workflow, source)
    except _RuleProblem as exc:
        raise DefinitionError([_problem(source or "", text, exc)]) from None


def _parse_all(texts: Iterable[object], workflow: str | None, source: str | None,
               location: str) -> tuple[list[AlertRule], list[Problem]]:
    rules: list[AlertRule] = []
    problems: list[Problem] = []
    for i, text in enumerate(texts):
        where = f"{location}[{i}]"
        if not isinstance(text, str):
            problems.append(Problem(location=where,
                                    message=f"an alert rule must be a string, got {text!r}"))
            continue
        try:
            rules.append(_parse(text, workflow, f"{source}: {where}" if source else where))
        except _RuleProblem as exc:
            problems.append(_problem(where, text, exc))
    return rules, problems


def parse_rules(texts: Iterable[str], *, workflow: str | None = None,
                source: str | None = None, location: str = "alerts") -> tuple[AlertRule, ...]:
    """Every rule of ``texts`` (for ``workflow``, or every workflow when None).  Raises
    one DefinitionError (headed by ``source``, e.g. a file or ``name@version``) listing
    every bad rule at ``location[i]``.  Each rule's ``source`` is ``"source: location[i]"``."""
    rules, problems = _parse_all(texts, workflow, source, location)
    if problems:
        raise DefinitionError(problems, source=source)
    return tuple(rules)


def check_rules(texts: Iterable[str], *, location: str = "alerts") -> list[Problem]:
    """The problems of ``texts`` (empty when all parse): for workflow validation."""
    return _parse_all(texts, None, None, location)[1]


def rules_from_config(data: object, *, source: str | None = None) -> tuple[AlertRule, ...]:
    """Rules of a parsed config document ``{"alerts": {workflow | "*": [rules...]}}``.
    A document without ``alerts`` has no rules."""
    if not isinstance(data, Mapping):
        raise DefinitionError([Problem(location="", message="expected a mapping with an "
                                       "'alerts' key")], source=source)
    table = data.get("alerts") or {}
    if not isinstance(table, Mapping):
        raise DefinitionError([Problem(location="alerts", message="expected a mapping of "
                                       "workflow name (or '*') to a list of rules")],
                              source=source)
    rules: list[AlertRule] = []
    problems: list[Problem] = []
    for name, value in table.items():
        where = f"alerts.{name}"
        texts = [value] if isinstance(value, str) else value  # one rule needs no list
        if not isinstance(texts, list):
            problems.append(Problem(location=where, message="expected a list of rules"))
            continue
        workflow = None if name == EVERY_WORKFLOW else str(name)
        found, bad = _parse_all(texts, workflow, source, where)
        rules += found
        problems += bad
    if problems:
        raise DefinitionError(problems, source=source)
    return tuple(rules)


def load_rules(path: str | Path) -> tuple[AlertRule, ...]:
    """Rules of a YAML (or JSON) config file; DefinitionError naming the file when it
    cannot be read or parsed, or holds a bad rule."""
    source = str(path)
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise DefinitionError([Problem(location="", message=f"cannot read: {exc}")],
                              source=source) from exc
    except yaml.YAMLError as exc:
        raise DefinitionError([Problem(location="", message=f"not valid YAML: {exc}")],
                              source=source) from exc
    return rules_from_config(data, source=source)


async def stored_rules(store: Store, workflows: Iterable[str]) -> tuple[AlertRule, ...]:
    """The rules in the latest stored definition of each of ``workflows`` (unknown
    workflows have none)."""
    rules: list[AlertRule] = []
    for name in workflows:
        try:
            record = await store.get_workflow(name)
        except WorkflowNotFound:
            continue
        texts = record.definition.get("alerts") or []
        if isinstance(texts, list):
            rules += parse_rules([str(t) for t in texts], workflow=name,
                                 source=f"{name}@{record.version}")
    return tuple(rules)


# ------------------------------------------------------------------------ evaluating


def _subjects(report: MetricsReport,
              rule: AlertRule) -> list[tuple[str, WorkflowMetrics | StepMetrics]]:
    workflows: Sequence[WorkflowMetrics]
    if rule.workflow is None:
        workflows = report.workflows
    else:
        found = report.workflow(rule.workflow)
        workflows = [found] if found is not None else []
    if rule.step is None:
        return [(w.workflow, w) for w in workflows]
    return [(w.workflow, s) for w in workflows if (s := w.step(rule.step)) is not None]


def evaluate(report: MetricsReport, rules: Iterable[AlertRule]) -> list[Firing]:
    """The rules that fire on ``report``, in rule order, then workflow order (pure)."""
    firings: list[Firing] = []
    for rule in rules:
        for workflow, subject in _subjects(report, rule):
            observed = rule.observe(subject)
            if observed is not None and rule.holds(observed):
                firings.append(Firing(rule=rule, workflow=workflow, step=rule.step,
                                      observed=observed))
    return firings


def firings_to_json(firings: Sequence[Firing]) -> JSONDict:
    return {"fired": bool(firings), "firings": [f.to_json() for f in firings]}


def render_firings(firings: Sequence[Firing]) -> str:
    """One ``ALERT ...`` line per firing, or a line saying none fired."""
    if not firings:
        return "no alerts fired\n"
    return "".join(f"ALERT {f.message()}\n" for f in firings)
