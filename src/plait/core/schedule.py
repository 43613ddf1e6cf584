"""When a schedule fires (docs/schedules.md): which fire times are due, and the next one.

Pure: the caller passes the last fire time it recorded and ``now``; nothing here reads
a clock or a store.  Times are seconds since the epoch; a fire time is always a whole
second (cron has minutes), so two processes computing the same fire get the same float
and a store can hold it as a unique key.

The five cron fields are read in the schedule's IANA time zone by cronsim, whose rules
on the days the clocks change are Debian cron's:
- spring forward: a time that does not exist that day (02:30 when 02:00 jumps to 03:00)
  fires once, at the jump (03:00 local);
- fall back: a time that happens twice (01:30 when 02:00 falls back to 01:00) fires
  once, at its first occurrence; wildcards (``*/15 * * * *``, ``0 * * * *``) keep
  firing in real time through both copies of the hour.

What is due after a gap (no scheduler ran, or none ran for a while):
- ``catch_up: skip``: only the latest missed fire;
- ``catch_up: all``: every missed fire, oldest first, but at most ``MAX_CATCH_UP`` of
  them: the latest ones.  A minutely schedule after a week of downtime starts 100
  runs, not 10,080; ``Due.dropped`` says older fires were left out.
The due fires are found walking backwards from ``now`` (cronsim's reverse iteration),
so the work is bounded by the cap, whatever the length of the gap.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from cronsim import CronSim, CronSimError

from .model import ScheduleSpec
from .serialize import canonical_json
from .suggest import did_you_mean

MAX_CATCH_UP = 100  # fires one `catch_up: all` schedule starts after one gap, at most

ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_FIELDS = "minute hour day-of-month month day-of-week"


@dataclass(frozen=True, slots=True)
class Cron:
    """A checked cron expression (five fields, aliases expanded) in its time zone."""

    fields: str
    zone: tzinfo

    def backwards(self, before: float) -> Iterator[float]:
        """Fire times strictly before ``before`` (a whole second), latest first."""
        start = datetime.fromtimestamp(before, self.zone)
        for fire in CronSim(self.fields, start, reverse=True):
            yield fire.timestamp()

    def first_after(self, after: float) -> float | None:
        """The first fire time strictly after ``after`` (None past the calendar's end)."""
        start = datetime.fromtimestamp(math.floor(after), self.zone)
        try:
            return next(iter(CronSim(self.fields, start))).timestamp()
        except (StopIteration, OverflowError, ValueError):
            return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Due:
    """What a scheduler should start now, and when to look again."""

    fires: tuple[float, ...]  # fire times to start, oldest first
    dropped: bool  # older missed fires were left out (skip, or past MAX_CATCH_UP)
    next_fire: float | None  # the first fire time after ``now``


def parse_cron(cron: str, timezone_name: str = "UTC") -> Cron:
    """The compiled schedule; ValueError saying what is wrong (cron and zone problems
    have their own messages: ``cron_problem``, ``timezone_problem``)."""
    return _parse(" ".join(cron.split()), timezone_name)


@lru_cache(maxsize=256)
def _parse(cron: str, timezone_name: str) -> Cron:
    problem = cron_problem(cron)
    if problem is not None:
        raise ValueError(problem)
    return Cron(fields=ALIASES.get(cron.lower(), cron), zone=zone(timezone_name))


def cron_problem(cron: str) -> str | None:
    """Why ``cron`` is not a five-field cron expression (or an alias), or None."""
    text = " ".join(cron.split())
    if text.startswith("@"):
        if text.lower() in ALIASES:
            return None
        return f"unknown cron alias {text!r} (known: {', '.join(ALIASES)})"
    count = len(text.split())
    if count != 5:
        return (f"a cron expression has 5 fields ({_FIELDS}), {text!r} has {count}"
                + (" (seconds are not supported)" if count == 6 else ""))
    try:
        CronSim(text, datetime(2000, 1, 1, tzinfo=UTC))
    except CronSimError as exc:
        return f"invalid cron expression {text!r}: {exc}"
    return None


def zone(name: str) -> tzinfo:
    """The IANA time zone ``name``; ValueError (with a suggestion) when unknown."""
    if name == "UTC":
        return UTC  # needs no time zone database
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(timezone_problem(name) or str(exc)) from None


def timezone_problem(name: str) -> str | None:
    """Why ``name`` is not an IANA time zone, or None."""
    if name == "UTC":
        return None
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        hint = did_you_mean(name, available_timezones())
        return f"unknown time zone {name!r}" + (f" ({hint})" if hint else
                                                 " (an IANA name, like Europe/Paris)")
    return None


def schedule_key(schedule: ScheduleSpec) -> str:
    """A stable name for the schedule within its workflow: 12 hex digits of the
    SHA-256 of its cron (whitespace normalised), time zone and input.  Stores record
    fires under it, so a new version of the definition that keeps the schedule goes on
    where the old one stopped, and editing any of these three makes a new schedule
    (with no history: it starts from when it is first seen).  ``catch_up`` is left
    out: changing it changes what happens after a gap, not which fires exist."""
    body = {"cron": " ".join(schedule.cron.split()), "timezone": schedule.timezone,
            "input": schedule.input}
    return hashlib.sha256(canonical_json(body).encode()).hexdigest()[:12]


def due(schedule: ScheduleSpec, last: float | None, now: float, *,
        cap: int = MAX_CATCH_UP) -> Due:
    """The fires of ``schedule`` in ``(last, now]`` to start now, by its catch_up rule.

    ``last``: the latest fire time recorded (or when the schedule was first seen); None
    means it is being seen for the first time now: nothing before ``now`` is due (no
    back-fill of the time before a schedule existed).  ValueError for a schedule that
    does not parse (validation refuses those)."""
    cron = parse_cron(schedule.cron, schedule.timezone)
    next_fire = cron.first_after(now)
    if last is None or last >= now:
        return Due(fires=(), dropped=False, next_fire=next_fire)
    fires, dropped = _missed(cron, last, now, 1 if schedule.catch_up == "skip" else cap)
    return Due(fires=fires, dropped=dropped, next_fire=next_fire)


def _missed(cron: Cron, last: float, now: float, limit: int) -> tuple[tuple[float, ...], bool]:
    """The latest ``limit`` fires in ``(last, now]``, oldest first, and whether there
    were more."""
    found: list[float] = []
    for fire in cron.backwards(math.floor(now) + 1):  # fires are whole seconds <= now
        if fire <= last:
            return tuple(reversed(found)), False
        if len(found) == limit:
            return tuple(reversed(found)), True
        found.append(fire)
    return tuple(reversed(found)), False

