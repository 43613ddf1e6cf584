"""Where the kill -9 chaos of test_cluster_faults.py aims (``aim``), judged from a
ledger: at a worker in the middle of a body, never at one whose body has been
interrupted so often that its step's retries could run out under the chaos alone."""

from __future__ import annotations

from cluster_harness import Entry
from test_cluster_faults import CHASED, aim, chaos_flow


def _line(step: str, attempt: int, pid: int, event: str = "start") -> Entry:
    return Entry("r1", step, attempt, pid, event, 0.0)


def test_a_worker_in_the_middle_of_a_body_is_aimed_at() -> None:
    ledger = [_line("a0", 1, 11), _line("a1", 2, 12), _line("a1", 2, 12, "end")]
    busy, spared = aim(ledger, [11, 12, 13])
    assert busy == [0] and spared == set()


def test_a_body_chased_to_attempt_chased_is_spared_with_its_worker() -> None:
    """A step restarted after every kill would be killed again and again: from attempt
    CHASED on, its worker is not aimed at, even when it also runs another body."""
    ledger = [_line("root", CHASED - 1, 10), _line("root", CHASED, 11),
              _line("a0", 1, 11), _line("a1", 1, 12)]
    busy, spared = aim(ledger, [11, 12])
    assert busy == [1] and spared == {0}


def test_the_aimed_kills_leave_every_step_most_of_its_retries() -> None:
    retry = chaos_flow()["defaults"]["retry"]
    assert retry["max_retries"] // 4 >= CHASED - 1  # aimed kills spend a quarter at most
