"""Hostile numbers: integers past what a store keeps (2^63, 10^400), floats past what a
timer waits for (1e308, inf, NaN), negatives and booleans, in every numeric field of a
definition and every number the command line parses.  Each is a located problem or a
usage error (exit 2), never a traceback or a crash later in a run (docs/limits.md)."""

from __future__ import annotations

import copy
import math
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hostile import invoke, located, problems, refused, validate_and_run, write_json
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plait import DefinitionError, Retry, Workflow
from plait.core.durations import parse_duration
from plait.core.model import Limits, RetryPolicy
from plait.core.numbers import MAX_DURATION, MAX_EPOCH, MAX_INT
from plait.core.retry import retry_delay
from plait.core.sizes import parse_size

VALID: dict[str, Any] = {
    "name": "numbers", "version": 1, "concurrency": 2, "timeout": "1m", "sla": "1m",
    "pools": {"p": {"concurrency": 1, "rate": "10/s"}},
    "limits": {"max_steps": 100, "max_depth": 100, "max_map_items": 100,
               "max_subworkflow_depth": 3, "max_output_bytes": 1_000_000},
    "concurrency_key": "k", "max_runs_per_key": 1,
    "steps": [
        {"id": "a", "type": "transform", "value": 1, "pool": "p", "timeout": "10s",
         "retry": {"max_retries": 1, "initial_delay": 0.01, "backoff": 2,
                   "max_delay": 1, "jitter": 0.1},
         "circuit_breaker": {"key": "k", "failure_threshold": 3, "reset_after": "1m"},
         "cache": {"key": "x", "ttl": "1h"}},
        {"id": "d", "type": "delay", "duration": 0.01, "depends_on": ["a"]},
        {"id": "e", "type": "delay", "until": 0, "depends_on": ["a"]},
        {"id": "m", "type": "map", "over": [1, 2], "concurrency": 2, "depends_on": ["a"],
         "step": {"type": "transform", "value": "{{ item }}"}},
        {"id": "ap", "type": "approval", "prompt": "ok?", "timeout": "1h",
         "depends_on": ["a"]},
        {"id": "l", "type": "llm", "base_url": "https://api.example.com/v1", "model": "m",
         "prompt": "p", "api_key_env": "KEY", "max_tokens": 10, "depends_on": ["a"]},
    ]}
FIELDS: list[tuple[str | int, ...]] = [
    ("version",), ("concurrency",), ("timeout",), ("sla",), ("max_runs_per_key",),
    ("pools", "p", "concurrency"), ("pools", "p", "rate"),
    *[("limits", name) for name in VALID["limits"]],
    ("steps", 0, "timeout"),
    *[("steps", 0, "retry", name) for name in VALID["steps"][0]["retry"]],
    ("steps", 0, "circuit_breaker", "failure_threshold"),
    ("steps", 0, "circuit_breaker", "reset_after"), ("steps", 0, "cache", "ttl"),
    ("steps", 1, "duration"), ("steps", 2, "until"), ("steps", 3, "concurrency"),
    ("steps", 4, "timeout"), ("steps", 5, "max_tokens")]
HUGE = [2**31, 2**63 - 1, 2**63, 2**64, 10**400, 1e308, math.inf, -math.inf, math.nan,
        "1e400", "1e300", "inf", "nan", "9999999999999h", "99999999999999999999/s",
        "9" * 500]


def location(path: tuple[str | int, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def with_value(path: tuple[str | int, ...], value: object) -> dict[str, Any]:
    definition = copy.deepcopy(VALID)
    target: Any = definition
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return definition


def loads_or_names(path: tuple[str | int, ...], value: object) -> None:
    """Valid (and then storable), or refused with every problem at ``path``."""
    try:
        checked = Workflow.from_dict(with_value(path, value)).validate()
    except DefinitionError as exc:
        where = location(path)
        assert all(p.location == where for p in exc.problems), \
            (where, [str(p) for p in exc.problems])
        return
    assert checked.fingerprint  # what is accepted can be stored


def test_the_valid_definition_is_valid() -> None:
    Workflow.from_dict(VALID).validate()


@pytest.mark.parametrize("path", FIELDS, ids=location)
def test_a_huge_number_in_any_field_is_a_located_problem(path: tuple[str | int, ...]) -> None:
    for value in HUGE:
        if path[-1] == "until" and value == 2**31:
            continue  # epoch seconds in 2038: a valid moment
        problems(with_value(path, value))  # refused...
        loads_or_names(path, value)  # ...at that field only


@pytest.mark.parametrize("path", FIELDS, ids=location)
def test_negatives_and_booleans_are_located_problems(path: tuple[str | int, ...]) -> None:
    for value in (-1, -(2**64), -0.5, True, False):
        loads_or_names(path, value)


hostile = (st.integers(min_value=2**31) | st.integers(max_value=-1)
           | st.sampled_from([0, 1, 2**63 - 1, 2**63, 2**64, 10**400, True, False])
           | st.floats(allow_nan=True, allow_infinity=True)
           | st.sampled_from(["1e400s", "9999999999999h", "inf", "nan", "1e300", "-1s",
                              "1/0s", "99999999999999999999/s", "3650d", "3651d"]))


@settings(max_examples=200, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(FIELDS), hostile)
def test_a_hostile_number_in_a_random_field_is_valid_or_located(
        path: tuple[str | int, ...], value: object) -> None:
    loads_or_names(path, value)


def test_the_largest_values_are_accepted() -> None:
    for path in FIELDS:
        if path[-1] in ("version", "concurrency", "max_runs_per_key", "failure_threshold",
                        "max_tokens") or path[0] == "limits" or path[-1] == "max_retries":
            Workflow.from_dict(with_value(path, MAX_INT)).validate()
    Workflow.from_dict(with_value(("timeout",), MAX_DURATION)).validate()
    Workflow.from_dict(with_value(("steps", 2, "until"), MAX_EPOCH)).validate()
    Workflow.from_dict(with_value(("pools", "p", "rate"), f"{MAX_INT}/s")).validate()


def test_messages_say_the_bound_and_the_value() -> None:
    assert located(with_value(("version",), 2**63), "version").message == \
        "must be at most 2,147,483,647, got 9223372036854775808"
    message = located(with_value(("version",), 10**400), "version").message
    assert "an integer of about 401 digits" in message
    assert "at most 10 years" in located(with_value(("sla",), "1e300"), "sla").message


def test_durations_sizes_and_retry_delays_never_overflow() -> None:
    for text in ("1e400", "inf", "-inf", "nan", "9" * 5000, "9999999999999h", "1e308d"):
        with pytest.raises(ValueError):
            parse_duration(text)
    with pytest.raises(ValueError, match="at most"):
        parse_duration(10**400)
    for size in ("9" * 400, "99999999999GiB", 2**63):
        with pytest.raises(ValueError, match="at most"):
            parse_size(size)
    policy = RetryPolicy(max_retries=MAX_INT, backoff=1000.0, max_delay=60.0)
    assert retry_delay(policy, 100_000, 0.5) == 63.0  # max_delay, plus half its 10% jitter
    assert retry_delay(RetryPolicy(initial_delay=0.0), 5000, 0.5) == 0.0


def test_a_workflow_built_in_python_has_the_same_bounds() -> None:
    def step() -> int:
        return 1

    cases = [({"version": 2**63}, "version"), ({"concurrency": 2**64}, "concurrency"),
             ({"pools": {"p": {"concurrency": 10**400}}}, "pools.p.concurrency"),
             ({"limits": Limits(max_output_bytes=2**63)}, "limits.max_output_bytes")]
    for options, where in cases:
        wf = Workflow("py", **options)
        wf.add_step("a", step)
        with pytest.raises(DefinitionError) as info:
            wf.validate()
        assert [p.location for p in info.value.problems] == [where]
    wf = Workflow("py")
    wf.add_step("a", step, retry=Retry(max_retries=2**63, backoff=1e308, jitter=math.inf))
    with pytest.raises(DefinitionError) as info:
        wf.validate()
    assert [p.location for p in info.value.problems] == [
        "steps[0].retry.max_retries", "steps[0].retry.backoff", "steps[0].retry.jitter"]
    with pytest.raises(ValueError, match="at most 10 years"):
        Workflow("py", timeout=1e300)


# ------------------------------------------------------------------ the command line


def test_validate_and_run_name_the_field(tmp_path: Path) -> None:
    for path, value in ((("version",), 2**63), (("steps", 0, "retry", "backoff"), 1e308),
                        (("steps", 1, "duration"), "1e300"), (("limits", "max_steps"), 2**64)):
        file = write_json(tmp_path, "flow.json", with_value(path, value))
        validate_and_run(file, location(path))


@pytest.mark.parametrize("args, named", [
    (["run", "w@99999999999999999999"], "FILE|NAME[@V]"),
    (["run", "w@" + "9" * 5000], "FILE|NAME[@V]"),
    (["graph", "w@9223372036854775808"], "FILE|NAME[@V]"),
    (["runs", "--limit", "99999999999999999999"], "--limit"),
    (["metrics", "--limit", str(2**63)], "--limit"),
    (["metrics", "--since", "99999999999999999999h"], "--since"),
    (["sla", "--since", "1e400"], "--since"),
    (["worker", "--concurrency", str(2**64)], "--concurrency"),
    (["worker", "--max-runs", str(2**31)], "--max-runs"),
    (["worker", "--lease", "1e300"], "--lease"),
    (["serve", "--grace", "inf"], "--grace"),
])
def test_command_line_numbers_are_bounded(args: list[str], named: str) -> None:
    refused(invoke(*args, "--db", "memory://"), 2, named)


def test_the_version_bound_matches_the_core() -> None:
    from plait.cli.inputs import MAX_INT as CLI_MAX_INT

    assert CLI_MAX_INT == MAX_INT


def test_no_traceback_from_the_real_command(plait: Any, tmp_path: Path) -> None:
    file = write_json(tmp_path, "flow.json", with_value(("version",), 2**63))
    done: subprocess.CompletedProcess[str] = plait("run", str(file))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "version: must be at most 2,147,483,647" in done.stderr
    done = plait("run", "numbers@99999999999999999999")
    assert done.returncode == 2 and "Traceback" not in done.stderr
