"""The notes of an attempt run by a worker (``AttemptLogs``) and how a driver reads
them back from an outcome (``history_notes``)."""

from __future__ import annotations

import logging

from plait.runtime.claims import history_notes
from plait.steps.context import MAX_ATTEMPT_RECORDS, AttemptLogs


def _journal() -> AttemptLogs:
    return AttemptLogs(lambda text: None if text is None else text.replace("sk-1", "***"))


def test_every_note_of_an_attempt_travels_redacted_and_in_order() -> None:
    journal = _journal()
    journal.begin("s", 2, None)
    journal.add("s", 2, logging.INFO, "start")
    journal.note("s", {"emit": {"value": "key sk-1", "attempt": 2}})
    journal.note("s", {"usage": {"attempt": 2, "prompt_tokens": 7}})
    journal.wait_requests["s"] = {"prompt": "ok?"}
    notes = journal.take("s", 2)
    assert [next(iter(n)) for n in notes] == ["log", "emit", "usage"]
    assert notes[0]["log"]["message"] == "start"
    assert notes[1] == {"emit": {"value": "key ***", "attempt": 2}}
    assert journal.wait_requests == {}  # forgotten with the attempt
    assert journal.take("s", 2) == ()


def test_what_is_added_for_an_attempt_not_running_here_is_dropped() -> None:
    journal = _journal()
    journal.note("s", {"emit": {"value": 1}})  # never begun
    journal.begin("s", 1, None)
    assert journal.take("s", 1) == ()
    journal.add("s", 1, logging.INFO, "late")  # after its outcome went
    journal.note("s", {"emit": {"value": 2}})
    assert journal.take("s", 1) == ()


def test_the_decision_of_the_ticket_is_what_the_attempt_reads() -> None:
    journal = _journal()
    journal.begin("s", 2, {"decision": "approved", "by": "ada"})
    assert journal.decisions == {"s": {"decision": "approved", "by": "ada"}}
    journal.take("s", 2)
    journal.begin("s", 3, None)
    assert journal.decisions == {}


def test_notes_beyond_the_bound_are_counted_in_a_last_warning() -> None:
    journal = _journal()
    journal.begin("s", 1, None)
    for n in range(MAX_ATTEMPT_RECORDS + 3):
        journal.note("s", {"emit": {"value": n}})
    notes = journal.take("s", 1)
    assert len(notes) == MAX_ATTEMPT_RECORDS + 1
    assert notes[-1]["log"]["level"] == "WARNING"
    assert notes[-1]["log"]["message"].startswith("3 step notes were dropped")


def test_bare_log_records_of_older_workers_read_as_log_notes() -> None:
    record = {"level": "INFO", "message": "hi", "attempt": 1, "at": 1.0}
    assert history_notes((record, {"usage": {"prompt_tokens": 1}},
                          {"log": record})) == [
        {"log": record}, {"usage": {"prompt_tokens": 1}}, {"log": record}]
