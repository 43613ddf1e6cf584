"""Fire times of schedules (plait.core.schedule): what is due after a gap under each
catch_up rule, the next fire, days when the clocks change, and properties that make
exactly-once scheduling possible (ticking often or once gives the same fires)."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plait.core.model import ScheduleSpec
from plait.core.schedule import (
    MAX_CATCH_UP,
    cron_problem,
    due,
    parse_cron,
    schedule_key,
    timezone_problem,
)

NEW_YORK = ZoneInfo("America/New_York")


def at(*fields: int, tz: ZoneInfo | None = NEW_YORK, fold: int = 0) -> float:
    return datetime(*fields, tzinfo=tz or UTC, fold=fold).timestamp()  # type: ignore[misc]


def local(times: tuple[float, ...] | list[float], tz: ZoneInfo = NEW_YORK) -> list[str]:
    return [datetime.fromtimestamp(t, tz).isoformat() for t in times]


def every(cron: str, tz: str = "UTC", catch_up: str = "all") -> ScheduleSpec:
    return ScheduleSpec(cron=cron, timezone=tz, catch_up=catch_up)  # type: ignore[arg-type]


# ------------------------------------------------------------------ due fires


def test_catch_up_all_starts_every_missed_fire_oldest_first() -> None:
    last = at(2024, 6, 1, 10, 0, tz=None)
    found = due(every("*/5 * * * *"), last, at(2024, 6, 1, 10, 17, 30, tz=None))
    assert found.fires == (last + 300, last + 600, last + 900)
    assert found.dropped is False
    assert found.next_fire == last + 1200


def test_catch_up_skip_starts_only_the_latest_missed_fire() -> None:
    last = at(2024, 6, 1, 10, 0, tz=None)
    found = due(every("*/5 * * * *", catch_up="skip"), last,
                at(2024, 6, 1, 10, 17, 30, tz=None))
    assert found.fires == (last + 900,)
    assert found.dropped is True  # 10:05 and 10:10 were left out


def test_one_missed_fire_is_not_reported_as_dropped_by_skip() -> None:
    last = at(2024, 6, 1, 10, 0, tz=None)
    found = due(every("*/5 * * * *", catch_up="skip"), last, last + 301)
    assert (found.fires, found.dropped) == ((last + 300,), False)


def test_a_fire_exactly_at_now_is_due_and_the_last_fire_is_not_again() -> None:
    last = at(2024, 6, 1, 10, 0, tz=None)
    assert due(every("*/5 * * * *"), last, last + 300).fires == (last + 300,)
    assert due(every("*/5 * * * *"), last + 300, last + 300.9).fires == ()


def test_first_sight_back_fills_nothing() -> None:
    now = at(2024, 6, 1, 10, 17, 30, tz=None)
    found = due(every("*/5 * * * *"), None, now)
    assert found.fires == ()
    assert found.next_fire == at(2024, 6, 1, 10, 20, tz=None)


def test_a_last_fire_after_now_is_nothing_due() -> None:
    now = at(2024, 6, 1, 10, 0, tz=None)
    assert due(every("* * * * *"), now + 120, now).fires == ()


def test_catch_up_all_is_bounded_by_the_cap_keeping_the_latest_fires() -> None:
    last = at(2024, 6, 1, tz=None)
    now = last + 7 * 86400 + 30  # a week of a minutely schedule: 10,080 missed
    found = due(every("* * * * *"), last, now)
    assert len(found.fires) == MAX_CATCH_UP
    assert found.dropped is True
    assert found.fires[-1] == now - 30
    assert found.fires[0] == now - 30 - (MAX_CATCH_UP - 1) * 60
    assert due(every("* * * * *"), last, now, cap=3).fires == (now - 150, now - 90,
                                                              now - 30)


def test_aliases_and_day_names() -> None:
    last = at(2024, 6, 3, 12, tz=None)  # a Monday
    assert local(due(every("@daily"), last, last + 2 * 86400).fires, ZoneInfo("UTC")) == [
        "2024-06-04T00:00:00+00:00", "2024-06-05T00:00:00+00:00"]
    weekdays = due(every("0 9 * * MON-FRI"), last, last + 7 * 86400).fires
    assert [datetime.fromtimestamp(t, UTC).strftime("%a") for t in weekdays] == [
        "Tue", "Wed", "Thu", "Fri", "Mon"]


def test_the_cron_fields_are_read_in_the_schedule_time_zone() -> None:
    last = at(2024, 6, 1, 12, tz=None)
    found = due(every("0 9 * * *", tz="Asia/Kolkata"), last, last + 86400)
    assert local(found.fires, ZoneInfo("Asia/Kolkata")) == ["2024-06-02T09:00:00+05:30"]
    assert local(found.fires, ZoneInfo("UTC")) == ["2024-06-02T03:30:00+00:00"]


# ------------------------------------------------------------ clocks changing


def test_spring_forward_a_time_that_does_not_exist_fires_once_at_the_jump() -> None:
    # 2024-03-10, New York: 02:00 EST jumps to 03:00 EDT; 02:30 does not exist
    found = due(every("30 2 * * *", tz="America/New_York"), at(2024, 3, 9, 12),
                at(2024, 3, 11, 12))
    assert local(found.fires) == ["2024-03-10T03:00:00-04:00", "2024-03-11T02:30:00-04:00"]


def test_spring_forward_wildcards_keep_real_time() -> None:
    found = due(every("*/30 * * * *", tz="America/New_York"), at(2024, 3, 10, 1, 0),
                at(2024, 3, 10, 3, 30))
    assert local(found.fires) == ["2024-03-10T01:30:00-05:00", "2024-03-10T03:00:00-04:00",
                                  "2024-03-10T03:30:00-04:00"]
    assert [b - a for a, b in zip(found.fires, found.fires[1:], strict=False)] == [1800, 1800]


def test_fall_back_a_time_that_happens_twice_fires_once() -> None:
    # 2024-11-03, New York: 02:00 EDT falls back to 01:00 EST; 01:30 happens twice
    found = due(every("30 1 * * *", tz="America/New_York"), at(2024, 11, 2, 12),
                at(2024, 11, 4, 12))
    assert local(found.fires) == ["2024-11-03T01:30:00-04:00", "2024-11-04T01:30:00-05:00"]


def test_fall_back_wildcards_fire_through_both_copies_of_the_hour() -> None:
    found = due(every("*/30 * * * *", tz="America/New_York"), at(2024, 11, 3, 0, 10),
                at(2024, 11, 3, 2, 0))
    assert local(found.fires) == [
        "2024-11-03T00:30:00-04:00", "2024-11-03T01:00:00-04:00",
        "2024-11-03T01:30:00-04:00", "2024-11-03T01:00:00-05:00",
        "2024-11-03T01:30:00-05:00", "2024-11-03T02:00:00-05:00"]


def test_the_next_fire_across_the_change_of_clocks() -> None:
    found = due(every("30 1 * * *", tz="America/New_York"), None,
                at(2024, 11, 3, 1, 45, fold=0))  # 01:45 EDT, before the fall back
    assert local([found.next_fire or 0]) == ["2024-11-04T01:30:00-05:00"]


# ---------------------------------------------------------------- properties

CRONS = ["* * * * *", "*/5 * * * *", "*/7 * * * *", "0 * * * *", "30 2 * * *",
         "30 1 * * *", "15,45 1-3 * * *", "0 0 * * SUN", "0 9 * * MON-FRI", "0 3 L * *",
         "0 0 1 * *", "@hourly"]
# zones with a change of clocks of one hour, or none (cronsim walking forward and
# backward disagree around Lord Howe's half-hour change; plait fires walking backward)
ZONES = ["UTC", "America/New_York", "Europe/London", "Europe/Paris", "Australia/Sydney",
         "Asia/Kolkata", "America/Sao_Paulo", "Pacific/Auckland"]
# 2020-2030, at second resolution, so ticks fall anywhere, clock changes included
moments = st.integers(1_577_836_800, 1_893_456_000).map(float)
gaps = st.floats(0, 3 * 86400)


@given(cron=st.sampled_from(CRONS), tz=st.sampled_from(ZONES), last=moments,
       first=gaps, second=gaps)
def test_ticking_in_between_gives_the_same_fires_as_one_tick(
        cron: str, tz: str, last: float, first: float, second: float) -> None:
    """A scheduler that ticks at t1 and t2 starts exactly the fires that one tick at t2
    starts: none twice, none lost (what the store records after t1 is its last fire)."""
    schedule = every(cron, tz)
    t1, t2 = last + first, last + first + second
    once = due(schedule, last, t2, cap=10_000)
    early = due(schedule, last, t1, cap=10_000)
    recorded = early.fires[-1] if early.fires else last
    late = due(schedule, recorded, t2, cap=10_000)
    assert early.fires + late.fires == once.fires


@given(cron=st.sampled_from(CRONS), tz=st.sampled_from(ZONES), last=moments, gap=gaps,
       cap=st.integers(1, 50))
def test_due_fires_are_whole_seconds_in_order_within_the_gap(
        cron: str, tz: str, last: float, gap: float, cap: int) -> None:
    now = last + gap
    found = due(every(cron, tz), last, now, cap=cap)
    assert all(last < t <= now and t == int(t) for t in found.fires)
    assert list(found.fires) == sorted(set(found.fires))
    assert len(found.fires) <= cap
    skip = due(every(cron, tz, "skip"), last, now)
    assert skip.fires == found.fires[-1:]
    assert skip.next_fire == found.next_fire


@given(cron=st.sampled_from(CRONS), tz=st.sampled_from(ZONES), now=moments)
def test_the_next_fire_is_the_first_one_after_now(cron: str, tz: str, now: float) -> None:
    found = due(every(cron, tz), None, now)
    assert found.next_fire is not None and found.next_fire > now
    # walking backward from it finds nothing between now and it
    assert due(every(cron, tz), now, found.next_fire).fires == (found.next_fire,)


@given(minutes=st.sampled_from([1, 2, 5, 10, 15, 20, 30]), last=moments,
       gap=st.floats(0, 86400))
def test_in_utc_a_step_of_minutes_fires_on_every_multiple(minutes: int, last: float,
                                                          gap: float) -> None:
    now = last + gap
    period = 60 * minutes
    first = (int(last) // period + 1) * period
    expected = tuple(float(t) for t in range(first, int(now) + 1, period))
    assert due(every(f"*/{minutes} * * * *"), last, now, cap=10_000).fires == expected


# ------------------------------------------------------- expressions and keys


@pytest.mark.parametrize(("cron", "message"), [
    ("*/5 * * *", "5 fields (minute hour day-of-month month day-of-week), '*/5 * * *' has 4"),
    ("0 */5 * * * *", "has 6 (seconds are not supported)"),
    ("61 * * * *", "invalid cron expression '61 * * * *': Bad minute"),
    ("0 0 30 2 *", "Bad day-of-month"),
    ("@fortnightly", "unknown cron alias '@fortnightly' (known: @yearly"),
    ("", "has 0"),
])
def test_cron_problems_say_what_is_wrong(cron: str, message: str) -> None:
    problem = cron_problem(cron)
    assert problem is not None and message in problem
    with pytest.raises(ValueError, match="cron"):
        parse_cron(cron)


@pytest.mark.parametrize("cron", ["*/5 * * * *", " 0  9 * * 1-5 ", "@Daily", "0 0 L * *",
                                  "0 12 * * 5#2", "0 0 29 2 *"])
def test_valid_cron_expressions(cron: str) -> None:
    assert cron_problem(cron) is None
    parse_cron(cron, "Europe/Paris")


def test_time_zone_problems_suggest_the_closest_name() -> None:
    assert timezone_problem("Europe/Paris") is None
    assert timezone_problem("UTC") is None
    assert timezone_problem("Europe/Pariss") == ("unknown time zone 'Europe/Pariss' "
                                                 "(did you mean 'Europe/Paris'?)")
    problem = timezone_problem("../../etc/passwd")
    assert problem is not None and problem.startswith("unknown time zone")
    with pytest.raises(ValueError, match="unknown time zone"):
        parse_cron("* * * * *", "Mars/Olympus")


def test_the_schedule_key_names_cron_zone_and_input_not_catch_up() -> None:
    base = ScheduleSpec(cron="*/5 * * * *", input={"customer": "acme"})
    key = schedule_key(base)
    assert len(key) == 12 and int(key, 16) >= 0
    assert schedule_key(ScheduleSpec(cron=" */5  * * * * ", input={"customer": "acme"},
                                     catch_up="all")) == key
    assert schedule_key(ScheduleSpec(cron="*/5 * * * *", input={"customer": "b"})) != key
    assert schedule_key(ScheduleSpec(cron="*/5 * * * *", timezone="Europe/Paris",
                                     input={"customer": "acme"})) != key
    assert schedule_key(ScheduleSpec(cron="*/10 * * * *", input={"customer": "acme"})) != key
