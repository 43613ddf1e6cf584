"""Notifications (docs/notifications.md): run_failed, approval_waiting, sla_breached and
alert delivered once to a URL (a real HTTP receiver on loopback) or a function, retried
on failure, refused by the network policy, recorded in the run's history."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from plait import Retry, Workflow
from plait.errors import DefinitionError
from plait.observe import notify, notify_outbox
from plait.observe.alerts import evaluate, parse_rules
from plait.observe.metrics import collect
from plait.runtime.engine import Engine
from plait.store import MemoryStore, open_store
from plait.store.base import Store

from .conftest import run_with

CALLS: list[dict[str, Any]] = []


def record_call(payload: dict[str, Any]) -> None:
    """A ``call:`` target (tests/integration/test_notifications:record_call)."""
    CALLS.append(payload)


class Receiver:
    """An HTTP server on 127.0.0.1 recording each POSTed JSON body and answering the
    next status of ``statuses`` (200 once they run out)."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.keys: list[str | None] = []  # each request's Idempotency-Key header
        self.statuses: list[int] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                owner.bodies.append(json.loads(self.rfile.read(length)))
                owner.keys.append(self.headers.get("Idempotency-Key"))
                status = owner.statuses.pop(0) if owner.statuses else 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook/secret-token"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                       daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as r:
        yield r


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(notify_outbox, "RETRY_DELAY_S", 0.05)
    monkeypatch.delenv(notify.ENV, raising=False)
    CALLS.clear()


def _boom() -> None:
    raise ValueError("the warehouse is on fire")


def _failing(name: str, targets: list[dict[str, Any]], **options: Any) -> Workflow:
    wf = Workflow(name, notify=targets, **options)
    wf.add_step("ok", lambda: 1)
    wf.add_step("load", _boom, depends_on=["ok"], retry=Retry(max_retries=0))
    return wf


async def _notes(store: Store, run_id: str) -> list[dict[str, Any]]:
    return [e.data["notification"] for e in await store.get_events(run_id)
            if e.kind == "note" and "notification" in e.data]


async def test_a_failed_run_posts_one_payload(receiver: Receiver) -> None:
    store = MemoryStore()
    engine = Engine(store)
    wf = _failing("nightly-etl", [{"on": ["run_failed"], "url": receiver.url}])
    result = await run_with(engine, wf)

    assert result.status == "failed"
    assert len(receiver.bodies) == 1
    body = receiver.bodies[0]
    assert body["event"] == "run_failed"
    assert body["run_id"] == result.run_id
    assert body["workflow"] == "nightly-etl"
    assert body["version"] == result.version
    assert body["status"] == "failed"
    assert body["error"] == result.error
    assert body["step"] == "load"
    assert "warehouse is on fire" in body["step_error"]
    assert body["text"].startswith(f"plait: run {result.run_id[:12]} of nightly-etl@")
    assert "step load: " in body["text"] and "warehouse is on fire" in body["text"]
    assert "\n" not in body["text"]
    assert body["at"].endswith("Z")
    assert body["id"].startswith("ntf-") and receiver.keys == [body["id"]]
    (note,) = await _notes(store, result.run_id)
    assert note == {"event": "run_failed", "target": "http://127.0.0.1/...", "attempt": 1,
                    "ok": True, "status_code": 200,  # the URL's secret path is not shown
                    "id": body["id"]}


async def test_a_completed_run_notifies_nobody(receiver: Receiver) -> None:
    wf = Workflow("fine", notify=[{"on": ["run_failed"], "url": receiver.url}])
    wf.add_step("ok", lambda: 1)
    result = await run_with(Engine(MemoryStore()), wf)
    assert result.status == "completed"
    assert receiver.bodies == []


async def test_a_failing_receiver_is_retried_until_it_answers(receiver: Receiver) -> None:
    receiver.statuses = [500]
    store = MemoryStore()
    result = await run_with(Engine(store), _failing(
        "retried", [{"on": ["run_failed"], "url": receiver.url}]))
    assert [b["event"] for b in receiver.bodies] == ["run_failed", "run_failed"]
    assert receiver.keys[0] == receiver.keys[1] == receiver.bodies[0]["id"]  # one key
    notes = await _notes(store, result.run_id)
    assert [(n["attempt"], n["ok"], n["status_code"]) for n in notes] == [
        (1, False, 500), (2, True, 200)]


async def test_a_receiver_that_keeps_failing_is_given_up_on(
        receiver: Receiver, caplog: pytest.LogCaptureFixture) -> None:
    receiver.statuses = [503] * 10
    store = MemoryStore()
    with caplog.at_level("WARNING", logger="plait.notify"):
        result = await run_with(Engine(store), _failing(
            "given-up", [{"on": ["run_failed"], "url": receiver.url}]))
    assert len(receiver.bodies) == notify.ATTEMPTS
    notes = await _notes(store, result.run_id)
    assert [n["ok"] for n in notes] == [False] * notify.ATTEMPTS
    assert notes[-1]["error"] == "HTTP 503"
    # kept, and said: the outbox lists it given up, the log names it
    (row,) = await store.list_notifications("given_up")
    assert (row.run_id, row.attempts, row.error) == (result.run_id, notify.ATTEMPTS,
                                                      "HTTP 503")
    (record,) = [r for r in caplog.records if "given up" in r.getMessage()]
    assert getattr(record, "notification", None) == row.id


async def test_a_denied_address_is_recorded_and_never_connected() -> None:
    store = MemoryStore()
    result = await run_with(Engine(store), _failing(
        "ssrf", [{"on": ["run_failed"], "url": "http://169.254.169.254/latest/meta-data"}]))
    (note,) = await _notes(store, result.run_id)  # final: not retried
    assert note["ok"] is False
    assert note["error"].startswith("NetworkRefused")
    assert "169.254.169.254" in note["error"]


async def test_a_function_target_is_called_with_the_payload() -> None:
    target = f"{__name__}:record_call"
    result = await run_with(Engine(MemoryStore()), _failing(
        "called", [{"on": ["run_failed"], "call": target}]))
    assert [c["event"] for c in CALLS] == ["run_failed"]
    assert CALLS[0]["run_id"] == result.run_id


async def test_an_approval_step_that_waits_notifies(receiver: Receiver) -> None:
    store = MemoryStore()
    wf = Workflow("gated", notify=[{"on": ["approval_waiting"], "url": receiver.url}])
    wf.add_step("build", lambda: 1)
    wf.add_step("gate", type="approval", prompt="ship build {{ steps.build.output }}?",
                show={"build": "{{ steps.build.output }}", "to": "prod"},
                depends_on=["build"])
    result = await run_with(Engine(store), wf)
    assert result.status == "waiting"
    (body,) = receiver.bodies
    assert body["event"] == "approval_waiting"
    assert body["step"] == "gate"
    # what the person is asked, rendered as stored: prompt and the content under review
    assert body["prompt"] == "ship build 1?"
    assert body["show"] == {"build": 1, "to": "prod"}
    assert body["text"].endswith("waiting for approval of step gate: ship build 1?")
    (note,) = await _notes(store, result.run_id)
    assert note["step"] == "gate"


async def test_a_run_past_its_sla_notifies_once_while_still_running(
        receiver: Receiver) -> None:
    async def slow() -> int:
        await asyncio.sleep(0.4)
        return 1

    wf = Workflow("slow-sla", sla=0.1,
                  notify=[{"on": ["sla_breached", "run_failed"], "url": receiver.url}])
    wf.add_step("slow", slow)
    wf.add_step("slower", slow, depends_on=["slow"])
    result = await run_with(Engine(MemoryStore()), wf)
    assert result.status == "completed"
    (body,) = receiver.bodies
    assert body["event"] == "sla_breached"
    assert body["status"] == "running"  # sent while the run went on
    assert "passed its SLA of" in body["text"]


async def test_process_wide_targets_apply_to_every_run(
        receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(notify.ENV, json.dumps([{"on": ["run_failed"], "url": receiver.url}]))
    wf = Workflow("plain")
    wf.add_step("load", _boom, retry=Retry(max_retries=0))
    await run_with(Engine(MemoryStore()), wf)
    assert [b["workflow"] for b in receiver.bodies] == ["plain"]


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql",
                                                             marks=pytest.mark.postgres)])
async def test_two_engines_seeing_one_event_deliver_it_once(
        receiver: Receiver, tmp_path: Path, backend: str,
        request: pytest.FixtureRequest) -> None:
    """Two processes (two stores on one database) notifying the same event."""
    url = (f"sqlite:///{tmp_path / 'plait.db'}" if backend == "sqlite"
           else request.getfixturevalue("pg_database"))
    a, b = open_store(url), open_store(url)
    await a.open()
    await b.open()
    try:
        wf = _failing("raced", [{"on": ["run_failed"], "url": receiver.url}])
        result = await run_with(Engine(a), wf)
        run = await b.get_run(result.run_id)
        targets = notify.parse_targets([{"on": ["run_failed"], "url": receiver.url}])[0]
        await asyncio.gather(notify.Notifier(a).notify("run_failed", run, targets),
                             notify.Notifier(b).notify("run_failed", run, targets))
    finally:
        await a.close()
        await b.close()
    assert len(receiver.bodies) == 1


async def test_alerts_notify_once_per_window(receiver: Receiver) -> None:
    store = MemoryStore()
    await run_with(Engine(store), _failing("alerting", []))
    report = await collect(store)
    firings = evaluate(report, parse_rules(["failures >= 1"], workflow="alerting"))
    assert firings
    notifier = notify.Notifier(store)
    targets = notify.parse_targets([{"on": ["alert"], "url": receiver.url}])[0]
    for _ in range(2):
        await notify.notify_alerts(notifier, firings, lambda wf: targets, now=7200.0)
    (body,) = receiver.bodies
    assert body["event"] == "alert"
    assert body["workflow"] == "alerting"
    assert body["rule"] == "failures >= 1"
    assert "failures" in body["text"]


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(("targets", "where", "words"), [
    ([{"on": ["run_faild"], "url": "https://x.example/"}], "notify[0].on[0]",
     "did you mean 'run_failed'"),
    ([{"on": ["run_failed"]}], "notify[0]", "exactly one of 'url' and 'call'"),
    ([{"on": ["run_failed"], "url": "https://x.example/", "call": "m:f"}], "notify[0]",
     "not both"),
    ([{"on": ["run_failed"], "url": "ftp://x.example/"}], "notify[0].url", "http(s) URL"),
    ([{"on": ["run_failed"], "call": "not a function"}], "notify[0].call", "module:function"),
    ([{"on": [], "url": "https://x.example/"}], "notify[0].on", "non-empty list"),
    ([{"on": ["alert"], "url": "https://x.example/", "urls": 1}], "notify[0].urls",
     "unknown field"),
    ({"on": ["alert"]}, "notify", "expected a list"),
])
def test_bad_targets_are_refused_before_anything_runs(targets: Any, where: str,
                                                      words: str) -> None:
    wf = Workflow("bad-notify", notify=targets)
    wf.add_step("ok", lambda: 1)
    with pytest.raises(DefinitionError) as caught:
        wf.validate()
    text = "\n".join(str(p) for p in caught.value.problems)
    assert where in text and words in text, text


def test_a_yaml_definition_takes_notify(tmp_path: Path) -> None:
    path = tmp_path / "flow.yaml"
    path.write_text("name: from-yaml\nnotify:\n  - on: [run_failed, alert]\n"
                    "    url: https://hooks.example/x\nsteps:\n"
                    "  - {id: a, type: transform, value: 1}\n")
    checked = Workflow.load(str(path)).validate()
    assert checked.spec.notify == [{"on": ["run_failed", "alert"],
                                    "url": "https://hooks.example/x"}]


def test_a_bad_process_wide_list_is_refused() -> None:
    with pytest.raises(DefinitionError) as caught:
        notify.targets_from_environment({notify.ENV: '[{"on": ["sla_breach"], "url": 1}]'})
    text = "\n".join(str(p) for p in caught.value.problems)
    assert "PLAIT_NOTIFY[0].on[0]" in text and "sla_breached" in text


async def test_the_sla_sweep_notifies_a_run_that_waits_for_a_person(
        receiver: Receiver) -> None:
    """A run parked for an approval has no driver: the sweep (what a server calls now
    and then) notices its breach, once."""
    store = MemoryStore()
    wf = Workflow("parked", sla=0.05,
                  notify=[{"on": ["sla_breached"], "url": receiver.url}])
    wf.add_step("gate", type="approval", prompt="ok?")
    result = await run_with(Engine(store), wf)
    assert result.status == "waiting"
    assert receiver.bodies == []  # within its SLA when it parked
    await asyncio.sleep(0.1)
    notifier = notify.Notifier(store)
    assert await notify.notify_sla_breaches(notifier) == 1
    assert await notify.notify_sla_breaches(notifier) == 1  # seen again, not sent again
    (body,) = receiver.bodies
    assert body["event"] == "sla_breached"
    assert body["status"] == "waiting"


def test_the_modules_a_definition_would_call_are_listed_for_the_allow_list() -> None:
    from plait.observe.notify_targets import call_modules

    assert call_modules([{"on": ["alert"], "url": "https://x.example/"},
                         {"on": ["run_failed"], "call": "ops.pager:page"}]) == [
        ("notify[1].call", "ops.pager")]


def test_plait_metrics_check_notifies_a_firing_alert_once(receiver: Receiver,
                                                          tmp_path: Path) -> None:
    from click.testing import CliRunner

    from plait.cli.main import cli

    url = f"sqlite:///{tmp_path / 'plait.db'}"
    wf = _failing("watched", [{"on": ["alert"], "url": receiver.url}],
                  alerts=["failures >= 1"])
    assert wf.run(db=url).status == "failed"
    assert receiver.bodies == []  # alert only: the failure itself notifies nobody
    for _ in range(2):
        result = CliRunner().invoke(cli, ["metrics", "--check", "--db", url])
        assert result.exit_code == 1, result.output
    (body,) = receiver.bodies  # once per rule and hour
    assert body["event"] == "alert"
    assert body["workflow"] == "watched"
    assert body["rule"] == "failures >= 1"


def boom_step() -> None:
    raise RuntimeError("disk full")


@pytest.mark.postgres
async def test_a_run_failing_on_a_cluster_of_workers_notifies_once(
        receiver: Receiver, pg_database: str) -> None:
    """Two PostgreSQL workers drive and execute the run: the failure is delivered once
    and recorded in the run's history."""
    from plait.core.states import RunStatus
    from plait.definitions import check_definition
    from plait.runtime.worker import Worker

    store = open_store(pg_database)
    await store.open()
    checked = check_definition({
        "name": "clustered-fail",
        "notify": [{"on": ["run_failed"], "url": receiver.url}],
        "steps": [{"id": "boom", "type": "python", "call": f"{__name__}:boom_step",
                   "retry": {"max_retries": 0}}]})
    workers = [Worker(store, name=f"w{i}", concurrency=2, lease=5.0, poll=0.05, grace=1.0,
                      schedules=False) for i in (1, 2)]
    try:
        run = await Engine(store).submit(checked, {})
        tasks = [asyncio.create_task(w.run()) for w in workers]
        for _ in range(400):
            if (await store.get_run(run.run_id)).status is RunStatus.FAILED and \
                    await _notes(store, run.run_id):
                break
            await asyncio.sleep(0.05)
        for w in workers:
            w.stop()
        await asyncio.wait_for(asyncio.gather(*tasks), 15)
        notes = await _notes(store, run.run_id)
    finally:
        await store.close()
    (body,) = receiver.bodies
    assert body["run_id"] == run.run_id and body["step"] == "boom"
    assert [n["ok"] for n in notes] == [True]


# ---------------------------------------------------------------- the outbox


async def test_a_notification_is_stored_with_the_failure_and_sent_by_a_later_sender(
        receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    """The process that stored the failure dies before sending (its sender never
    runs): the notification is in the outbox, and any later sender sends it."""
    async def dies(self: notify_outbox.OutboxSender, ids: object) -> None:
        return None

    store = MemoryStore()
    with monkeypatch.context() as patched:
        patched.setattr(notify_outbox.OutboxSender, "send_until_settled", dies)
        result = await run_with(Engine(store), _failing(
            "crashed", [{"on": ["run_failed"], "url": receiver.url}]))
    assert receiver.bodies == []
    (row,) = await store.list_notifications("pending")
    assert (row.run_id, row.event, row.attempts) == (result.run_id, "run_failed", 0)
    assert await notify_outbox.OutboxSender(store).pump() == 1
    (body,) = receiver.bodies
    assert body["id"] == row.id and receiver.keys == [row.id]
    assert [r.state for r in await store.list_notifications()] == ["sent"]


def test_plait_notifications_lists_what_was_given_up(receiver: Receiver,
                                                     tmp_path: Path) -> None:
    from click.testing import CliRunner

    from plait.cli.main import cli

    receiver.statuses = [503] * notify.ATTEMPTS
    url = f"sqlite:///{tmp_path / 'plait.db'}"
    run = _failing("unheard", [{"on": ["run_failed"], "url": receiver.url}]).run(db=url)
    assert len(receiver.bodies) == notify.ATTEMPTS
    listed = CliRunner().invoke(cli, ["notifications", "--db", url, "--state", "given_up",
                                      "--json", "--check"])
    assert listed.exit_code == 1, listed.output
    (row,) = json.loads(listed.output)["notifications"]
    assert (row["run_id"], row["event"], row["state"], row["attempts"], row["error"]) == (
        run.run_id, "run_failed", "given_up", notify.ATTEMPTS, "HTTP 503")
    assert row["target"] == "http://127.0.0.1/..."  # the URL's secret path is not shown
    text = CliRunner().invoke(cli, ["notifications", "--db", url])
    assert text.exit_code == 0 and "given_up" in text.output and row["id"] in text.output


async def test_a_run_sends_its_notification_behind_older_due_ones(
        receiver: Receiver) -> None:
    """More rows than a sender claims at once are due before the run's: the process
    that drove the run still sends its notification (and the older ones) before it
    stops driving it."""
    from plait.store.base import OutboxRow

    store = MemoryStore()
    older = [OutboxRow(id=f"older-{i}", event="alert", target={"call": f"{__name__}:record_call"},
                       shown="call", body={"event": "alert", "id": f"older-{i}"},
                       next_at=float(i), created_at=float(i))
             for i in range(2 * notify_outbox.BATCH + 5)]
    assert await store.enqueue_notifications(older) == len(older)
    result = await run_with(Engine(store), _failing(
        "behind", [{"on": ["run_failed"], "url": receiver.url}]))
    assert [b["run_id"] for b in receiver.bodies] == [result.run_id]
    assert sorted(c["id"] for c in CALLS) == sorted(r.id for r in older)


async def test_a_servers_notification_keeps_the_untrusted_policy_whoever_sends_it(
        receiver: Receiver) -> None:
    """Stored by a process judging runs by the untrusted rules (``plait serve``), a
    notification to a loopback URL is refused even by a sender whose own policy allows
    loopback (a plain worker sharing the store)."""
    from plait.core.trust import TrustPolicy

    store = MemoryStore()
    engine = Engine(store, trust=TrustPolicy())
    wf = _failing("served", [{"on": ["run_failed"], "url": receiver.url}])
    result = await run_with(engine, wf)
    assert receiver.bodies == []
    (note,) = await _notes(store, result.run_id)
    assert note["error"].startswith("NetworkRefused")
    (row,) = await store.list_notifications("given_up")
    await store.enqueue_notifications([dataclasses.replace(row, id="again")])
    assert await notify_outbox.OutboxSender(store).pump() == 1  # a default policy
    assert receiver.bodies == []
