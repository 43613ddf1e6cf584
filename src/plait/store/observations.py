"""What the observability features ask of a store, for every backend: the aggregates a
Prometheus scrape reads (``Store.metrics_snapshot``).  (Notifications: ``store.outbox``.)

A scrape must stay cheap however long the history: the SQL backends answer it with a
handful of ``GROUP BY`` aggregates computed by the database (one pass over the
``runs``, ``steps`` and ``attempts`` tables, nothing but the aggregates sent back); the
memory store folds its rows in Python.  Step durations are returned as histogram
buckets for the bounds the caller gives, so no duration list ever leaves the store.

Token usage is summed per step from the usage of the model calls it sent (``llm``
steps and ``ctx.llm``, every attempt: the ``step_tokens`` rows ``Store.add_llm_tokens``
adds to); a step that sent none counts the ``usage`` object of its stored output, if
it has one (``usage.prompt_tokens``, ``usage.completion_tokens`` and
``usage.total_tokens`` when they are numbers).

Map items count under their map step (``fetch[3]`` is aggregated as ``fetch``): the
databases group by that name, so a map of 100,000 items sends back the rows of one
step, and the number of rows (and of the series a scrape exposes) follows the
definitions stored, never the size of a run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core.model import JSON

if TYPE_CHECKING:
    import sqlite3  # the SQLite store's functions' type only: validate loads no sqlite3

TOKEN_KINDS = ("prompt_tokens", "completion_tokens", "total_tokens")
LEASE_EXPIRED = "LeaseExpired"  # how a reaped attempt's error starts (base.reaped_error)
_ITEM_INDEX = re.compile(r"\[\d+\]")
# the SQL of series_name for one level of item (user step ids never hold brackets):
# "fetch[3]" -> "fetch", in SQLite and PostgreSQL alike
_STEP = ("CASE WHEN substr(s.step_id, length(s.step_id)) = ']'"
         " THEN rtrim(rtrim(rtrim(s.step_id, ']'), '0123456789'), '[') ELSE s.step_id END")


def series_name(name: str) -> str:
    """The name a workflow or step is counted under: without its map item indexes
    (``fetch[3]`` -> ``fetch``; ``parent.fetch[3]`` -> ``parent.fetch``)."""
    return _ITEM_INDEX.sub("", name) if "[" in name else name


def item_pattern(name: str) -> str:
    """The same rule for ``plait metrics``, which marks the folding: ``fetch[3]`` ->
    ``fetch[*]`` (one row for every item of the map ``fetch``)."""
    return _ITEM_INDEX.sub("[*]", name) if "[" in name else name


@dataclass(slots=True, kw_only=True)
class DurationBuckets:
    """Finished steps of one (workflow, step): how many, the sum of their durations,
    and per bound of the request how many took at most that long (cumulative)."""

    workflow: str
    step: str
    count: int = 0
    total: float = 0.0
    buckets: list[int] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class MetricsSnapshot:
    """Aggregates over the whole stored history (``Store.metrics_snapshot``)."""

    runs: dict[tuple[str, str], int] = field(default_factory=dict)  # (workflow, status)
    steps: dict[tuple[str, str, str], int] = field(default_factory=dict)  # + step
    retries: dict[tuple[str, str], int] = field(default_factory=dict)  # (workflow, step)
    durations: list[DurationBuckets] = field(default_factory=list)
    tickets_queued: int = 0  # dispatched attempts nobody claimed yet
    tickets_claimed: int = 0  # claimed, running on a worker
    lease_reclaims: int = 0  # attempts whose worker's lease expired (reaped)
    tokens: dict[tuple[str, str, str], int] = field(default_factory=dict)  # + kind


# a step row that sent no model call (its output's usage counts instead)
_NO_CALLS = ("NOT EXISTS (SELECT 1 FROM step_tokens AS t"
             " WHERE t.run = s.run AND t.step_id = s.step_id)")
# the usage of the model calls each step sent
_STEP_TOKENS = (f"SELECT r.workflow, {_STEP}, sum(s.prompt), sum(s.completion),"  # noqa: S608
                " sum(s.total) FROM step_tokens AS s JOIN runs AS r ON r.id = s.run"
                f" GROUP BY r.workflow, {_STEP}")


def _number(value: JSON) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def count_usage(snapshot: MetricsSnapshot, workflow: str, step: str, output: JSON) -> None:
    """Count the tokens of one step output (see the module docstring)."""
    if not isinstance(output, dict):
        return
    usage = output.get("usage")
    if not isinstance(usage, dict):
        return
    for kind in TOKEN_KINDS:
        n = _number(usage.get(kind))
        if n is not None:
            key = (workflow, step, kind)
            snapshot.tokens[key] = snapshot.tokens.get(key, 0) + int(n)


def fold_step(snapshot: MetricsSnapshot, bounds: Sequence[float], workflow: str, step: str,
              status: str, attempts: int, started: float | None, finished: float | None,
              output: JSON, by_step: dict[tuple[str, str], DurationBuckets]) -> None:
    """The memory store's aggregation of one step row."""
    step = series_name(step)
    key = (workflow, step, status)
    snapshot.steps[key] = snapshot.steps.get(key, 0) + 1
    if attempts > 1:
        snapshot.retries[workflow, step] = (snapshot.retries.get((workflow, step), 0)
                                            + attempts - 1)
    if started is not None and finished is not None:
        found = by_step.get((workflow, step))
        if found is None:
            found = by_step[workflow, step] = DurationBuckets(
                workflow=workflow, step=step, buckets=[0] * len(bounds))
            snapshot.durations.append(found)
        took = finished - started
        found.count += 1
        found.total += took
        for i, bound in enumerate(bounds):
            if took <= bound:
                found.buckets[i] += 1
    count_usage(snapshot, workflow, step, output)


# ------------------------------------------------------------------------ SQL

def _bucket_columns(bounds: Sequence[float], placeholder: Iterable[str]) -> str:
    return "".join(f", sum(CASE WHEN s.finished_at - s.started_at <= {p} THEN 1 ELSE 0 END)"
                   for _, p in zip(bounds, placeholder, strict=False))


def _sqlite_durations(bounds: Sequence[float]) -> str:
    return (f"SELECT r.workflow, {_STEP}, count(*), sum(s.finished_at - s.started_at)"  # noqa: S608
            + _bucket_columns(bounds, ("?" for _ in bounds))
            + " FROM steps AS s JOIN runs AS r ON r.id = s.run"
              " WHERE s.started_at IS NOT NULL AND s.finished_at IS NOT NULL"
              f" GROUP BY r.workflow, {_STEP}")


_SQLITE = {
    "runs": "SELECT workflow, status, count(*) FROM runs GROUP BY workflow, status",
    "steps": f"SELECT r.workflow, {_STEP}, s.status, count(*),"  # noqa: S608 (constants)
             " sum(CASE WHEN s.attempts > 1 THEN s.attempts - 1 ELSE 0 END)"
             " FROM steps AS s JOIN runs AS r ON r.id = s.run"
             f" GROUP BY r.workflow, {_STEP}, s.status",
    "tickets": "SELECT sum(CASE WHEN token IS NULL THEN 1 ELSE 0 END),"
               " sum(CASE WHEN token IS NULL THEN 0 ELSE 1 END) FROM tickets",
    "reclaims": "SELECT count(*) FROM attempts WHERE error LIKE ?",
    "tokens": f"SELECT r.workflow, {_STEP}, sum(json_extract(s.output, '$.usage.' || ?))"  # noqa: S608
              " FROM steps AS s JOIN runs AS r ON r.id = s.run"
              " WHERE s.output IS NOT NULL AND json_valid(s.output)"
              " AND json_type(s.output, '$.usage.' || ?) IN ('integer', 'real')"
              f" AND {_NO_CALLS} GROUP BY r.workflow, {_STEP}",
    "step_tokens": _STEP_TOKENS,
}


def sqlite_snapshot(conn: sqlite3.Connection, bounds: Sequence[float]) -> MetricsSnapshot:
    """``Store.metrics_snapshot`` on a SQLite connection (one read transaction)."""
    out = MetricsSnapshot()
    for workflow, status, n in conn.execute(_SQLITE["runs"]):
        out.runs[workflow, status] = int(n)
    for workflow, step, status, n, retries in conn.execute(_SQLITE["steps"]):
        out.steps[workflow, step, status] = int(n)
        if retries:
            out.retries[workflow, step] = out.retries.get((workflow, step), 0) + int(retries)
    for row in conn.execute(_sqlite_durations(bounds), tuple(bounds)):
        out.durations.append(_durations(row))
    queued, claimed = conn.execute(_SQLITE["tickets"]).fetchone()
    out.tickets_queued, out.tickets_claimed = int(queued or 0), int(claimed or 0)
    out.lease_reclaims = int(conn.execute(_SQLITE["reclaims"],
                                          (LEASE_EXPIRED + "%",)).fetchone()[0])
    for kind in TOKEN_KINDS:
        for workflow, step, n in conn.execute(_SQLITE["tokens"], (kind, kind)):
            out.tokens[workflow, step, kind] = int(n)
    _fold_step_tokens(out, conn.execute(_SQLITE["step_tokens"]).fetchall())
    return out


def _fold_step_tokens(out: MetricsSnapshot, rows: Iterable[Sequence[Any]]) -> None:
    """Add the rows of ``step_tokens`` (workflow, step, prompt, completion, total)."""
    for workflow, step, *counts in rows:
        for kind, n in zip(TOKEN_KINDS, counts, strict=True):
            key = (workflow, step, kind)
            out.tokens[key] = out.tokens.get(key, 0) + int(n or 0)


def _durations(row: Sequence[Any]) -> DurationBuckets:
    return DurationBuckets(workflow=row[0], step=row[1], count=int(row[2]),
                           total=float(row[3] or 0.0),
                           buckets=[int(n or 0) for n in row[4:]])


def postgres_durations(bounds: Sequence[float]) -> str:
    return (f"SELECT r.workflow, {_STEP}, count(*), sum(s.finished_at - s.started_at)"  # noqa: S608
            + _bucket_columns(bounds, (f"%(b{i})s" for i in range(len(bounds))))
            + " FROM steps AS s JOIN runs AS r ON r.id = s.run"
              " WHERE s.started_at IS NOT NULL AND s.finished_at IS NOT NULL"
              f" GROUP BY r.workflow, {_STEP}")


# Token counts: json_typeof guards the cast, so an odd output never fails the scrape.
POSTGRES = {
    "runs": "SELECT workflow, status, count(*) FROM runs GROUP BY workflow, status",
    "steps": _SQLITE["steps"],
    "tickets": _SQLITE["tickets"],
    "reclaims": "SELECT count(*) FROM attempts WHERE error LIKE %(pattern)s",
    "tokens": f"SELECT r.workflow, {_STEP}, k.kind,"  # noqa: S608 (constants)
              " sum((s.output -> 'usage' ->> k.kind)::numeric)::bigint"
              " FROM steps AS s JOIN runs AS r ON r.id = s.run"
              " CROSS JOIN unnest(%(kinds)s::text[]) AS k(kind)"
              " WHERE json_typeof(s.output) = 'object'"
              " AND json_typeof(s.output -> 'usage') = 'object'"
              " AND json_typeof(s.output -> 'usage' -> k.kind) = 'number'"
              f" AND {_NO_CALLS} GROUP BY r.workflow, {_STEP}, k.kind",
    "step_tokens": _STEP_TOKENS,
}


def postgres_fold(out: MetricsSnapshot, name: str, rows: Sequence[Sequence[Any]]) -> None:
    """Put the rows of ``POSTGRES[name]`` (or ``durations``) into ``out``."""
    if name == "runs":
        for workflow, status, n in rows:
            out.runs[workflow, status] = int(n)
    elif name == "steps":
        for workflow, step, status, n, retries in rows:
            out.steps[workflow, step, status] = int(n)
            if retries:
                out.retries[workflow, step] = (out.retries.get((workflow, step), 0)
                                               + int(retries))
    elif name == "durations":
        out.durations.extend(_durations(row) for row in rows)
    elif name == "tickets":
        queued, claimed = rows[0]
        out.tickets_queued, out.tickets_claimed = int(queued or 0), int(claimed or 0)
    elif name == "reclaims":
        out.lease_reclaims = int(rows[0][0])
    elif name == "tokens":
        for workflow, step, kind, n in rows:
            key = (workflow, step, kind)
            out.tokens[key] = out.tokens.get(key, 0) + int(n)
    elif name == "step_tokens":
        _fold_step_tokens(out, rows)
