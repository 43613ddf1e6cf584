"""The ``schedules:`` field of a definition (docs/schedules.md): its shape, read by the loader and
the Python front end alike (``parse_schedules``), and what is checked with the whole
definition (``schedule_problems``): the cron expression, the time zone, the catch_up
rule, the input against the workflow's input schema, and repeats.

Every problem names its field: ``schedules[1].cron``, ``schedules[0].input.customer``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from ..errors import Problem
from .concurrency_key import key_problems, render_key
from .expressions import RenderError
from .jsoncheck import find_problems
from .model import CATCH_UP, JSON, CatchUp, JSONDict, ScheduleSpec, WorkflowSpec
from .schedule import cron_problem, schedule_key, timezone_problem
from .suggest import did_you_mean

SCHEDULE_FIELDS = ("cron", "timezone", "input", "catch_up")
_SHAPE = "a list of schedules, each {cron, timezone, input, catch_up}"


def parse_schedules(value: JSON) -> tuple[tuple[ScheduleSpec, ...], list[Problem]]:
    """The schedules of a definition's ``schedules:`` and the problems of their shape.
    A schedule with a problem is still returned (so the others keep their index), with
    the broken fields at their defaults; ``schedule_problems`` does not judge it again."""
    if value is None:
        return (), []
    if not isinstance(value, list):
        return (), [Problem(location="schedules", message=f"expected {_SHAPE}, "
                            f"got {type(value).__name__}")]
    problems: list[Problem] = []
    found = tuple(_parse_one(f"schedules[{i}]", item, problems)
                  for i, item in enumerate(value))
    return found, problems


def _parse_one(where: str, item: JSON, problems: list[Problem]) -> ScheduleSpec:
    if not isinstance(item, dict):
        problems.append(Problem(location=where, message=(
            f"a schedule must be a mapping {{cron, timezone, input, catch_up}}, got "
            f"{type(item).__name__}")))
        return ScheduleSpec(cron="")
    for key in item:
        if key not in SCHEDULE_FIELDS:
            problems.append(Problem(location=f"{where}.{key}", message=(
                "unknown field for a schedule"), hint=did_you_mean(key, SCHEDULE_FIELDS)
                or f"known: {', '.join(SCHEDULE_FIELDS)}"))
    cron = item.get("cron")
    if not isinstance(cron, str):
        problems.append(Problem(location=f"{where}.cron", message=(
            "missing field 'cron' of a schedule" if cron is None else
            f"expected a cron expression like '*/5 * * * *', got {cron!r}")))
        cron = ""
    zone = item.get("timezone", "UTC")
    if not isinstance(zone, str):
        problems.append(Problem(location=f"{where}.timezone", message=(
            f"expected an IANA time zone name like 'Europe/Paris', got {zone!r}")))
        zone = "UTC"
    catch_up = item.get("catch_up", "skip")
    if catch_up not in CATCH_UP:
        problems.append(_catch_up_problem(f"{where}.catch_up", catch_up))
        catch_up = "skip"
    return ScheduleSpec(cron=cron, timezone=zone, input=item.get("input", {}),
                        catch_up=cast(CatchUp, catch_up))


def _catch_up_problem(where: str, value: object) -> Problem:
    hint = did_you_mean(value, CATCH_UP) if isinstance(value, str) else None
    return Problem(location=where, message=f"expected 'skip' or 'all', got {value!r}",
                   hint=hint or "skip: start only the latest missed fire; all: every one")


def schedule_problems(spec: WorkflowSpec, prior: Sequence[Problem] = ()) -> list[Problem]:
    """Every problem of ``spec.schedules`` (a field with a problem in ``prior``, from
    loading, is not judged again)."""
    reported = {p.location for p in prior}
    # the schedules with a problem of their shape: left out of the search for repeats
    broken = {loc.partition("]")[0] + "]" for loc in reported if loc.startswith("schedules[")}
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    validator = _input_validator(spec.input_schema) if spec.schedules else None
    # each schedule's input must give the run a key (when the key itself is valid)
    run_key = spec.concurrency_key if spec.schedules and not key_problems(spec, prior) \
        else None
    for i, schedule in enumerate(spec.schedules):
        where = f"schedules[{i}]"
        if where in reported:
            continue
        found = (_field_problems(where, schedule, reported)
                 + _input_problems(f"{where}.input", schedule.input, validator))
        if not found and run_key is not None:
            found = _key_problems(f"{where}.input", run_key, schedule.input)
        problems += found
        if found or where in broken:
            continue
        key = schedule_key(schedule)
        if key in seen:
            problems.append(Problem(location=where, message=(
                f"the same cron, time zone and input as schedules[{seen[key]}]: it "
                f"would start the same runs"), hint="remove one of them"))
        else:
            seen[key] = i
    return problems


def _field_problems(where: str, schedule: ScheduleSpec, reported: set[str]) -> list[Problem]:
    problems: list[Problem] = []
    cron, zone = schedule.cron, schedule.timezone
    if f"{where}.cron" not in reported:
        message = (f"expected a cron expression like '*/5 * * * *', got {cron!r}"
                   if not isinstance(cron, str) or not cron.strip() else cron_problem(cron))
        if message is not None:
            problems.append(Problem(location=f"{where}.cron", message=message,
                                    hint="minute hour day-of-month month day-of-week, "
                                    "or @hourly, @daily, @weekly, @monthly, @yearly"))
    if f"{where}.timezone" not in reported:
        message = (f"expected an IANA time zone name, got {zone!r}"
                   if not isinstance(zone, str) else timezone_problem(zone))
        if message is not None:
            problems.append(Problem(location=f"{where}.timezone", message=message))
    if f"{where}.catch_up" not in reported and schedule.catch_up not in CATCH_UP:
        problems.append(_catch_up_problem(f"{where}.catch_up", schedule.catch_up))
    return problems


def _key_problems(where: str, key: str, input: JSON) -> list[Problem]:
    try:
        render_key(key, input)
    except RenderError as exc:
        return [Problem(location=where, message=(
            f"the concurrency_key {key!r} does not render for this input: {exc}"))]
    return []


class _Validator:
    """The input schema's validator (jsonschema is imported only for a definition that
    has both schedules and an input schema)."""

    def __init__(self, schema: JSONDict) -> None:
        from jsonschema import Draft202012Validator

        self.check = Draft202012Validator(schema).iter_errors


def _input_validator(schema: JSONDict | None) -> _Validator | None:
    """None without a schema, or with one that is not a valid JSON Schema (reported on
    its own, at ``input``)."""
    if schema is None:
        return None
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError:
        return None
    return _Validator(schema)


def _input_problems(where: str, value: JSON, validator: _Validator | None) -> list[Problem]:
    not_json = find_problems(value)
    if not_json:
        return [Problem(location=f"{where}{found.short_path}", message=f"value {found.problem}")
                for found in not_json]
    if validator is None:
        return []
    problems = []
    for err in sorted(validator.check(value), key=lambda e: [str(p) for p in e.path]):
        path = "".join(f".{p}" if isinstance(p, str) else f"[{p}]" for p in err.path)
        problems.append(Problem(location=f"{where}{path}", message=(
            f"the schedule's input does not match the workflow's input schema: "
            f"{err.message}")))
    return problems
