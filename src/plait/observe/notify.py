"""Notifications: tell people when a run fails, waits for approval, passes its SLA, or
an alert rule fires (docs/notifications.md).

Targets come from a definition's ``notify:`` list and from the process-wide list in
``PLAIT_NOTIFY`` (JSON; ``plait --notify``), both of one shape::

    notify:
      - on: [run_failed, sla_breached]
        url: https://hooks.slack.com/services/...      # POSTed the payload as JSON
      - on: [approval_waiting]
        call: mypkg.oncall:page                          # called with the payload

Payload (JSON)::

    {"event": "run_failed" | "sla_breached" | "approval_waiting" | "alert",
     "run_id": str | null, "workflow": str, "version": int | null,
     "step": str,            # approval_waiting (the step), alert (a step rule's step)
     "prompt": str | null,   # approval_waiting: the rendered prompt (redacted)
     "show": JSON,           # approval_waiting: the content under review (redacted)
     "status": str,          # the run's status when the event happened ("firing": alert)
     "error": str,           # run_failed
     "text": str,            # a one-line summary (Slack's incoming webhooks show it)
     "at": ISO-8601 UTC}

Once: before sending, the deliverer claims the delivery's key (run, event, step,
target) in the store (``Store.claim_notification``, an insert-if-absent); only the
claimer sends, so a notification is sent once however many processes or workers see
the event.  The key holds a hash of the target, never the URL (webhook URLs are
secrets).  A failed delivery (connection error, timeout, HTTP status >= 300, an
exception from the function) is retried ``ATTEMPTS`` times in all with a doubling delay
from ``RETRY_DELAY_S``; a refusal of the network policy is final and never connects.
Every attempt is recorded in the run's history as a note
``{"notification": {"event", "target", "attempt", "ok", "status_code"?, "error"?}}``
(``target``: a URL cut to its scheme and host, or the ``module:function``).

Delivery is best effort after the claim: a process that dies between claiming and
sending loses that notification (at most once, never twice).
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from ..core.durations import format_duration
from ..core.model import JSON, JSONDict
from ..core.states import FINAL_RUN_STATES, RunStatus, StepStatus
from ..core.timestamps import iso
from ..core.trust import TrustPolicy, call_problem
from ..core.validate import CheckedWorkflow
from ..errors import NetworkRefused, StoreError
from ..steps.binding import import_untrusted_call
from ..steps.netpolicy import NetworkPolicy
from ..store.base import RunRecord, Store, WriteBatch
from ..store.observations import NotificationKey
from .notify_targets import (
    ENV,
    EVENTS,
    Target,
    check_targets,
    parse_targets,
    targets_from_environment,
)

__all__ = ["ENV", "EVENTS", "Notifier", "Target", "check_targets", "parse_targets",
           "targets_from_environment"]

ATTEMPTS = 3
RETRY_DELAY_S = 0.5  # then 1 s: a delivery gives up within about 1.5 s plus its requests
TIMEOUT_S, CONNECT_TIMEOUT_S = 10.0, 5.0  # per request
_log = logging.getLogger("plait.notify")

Sender = Callable[["Target", JSONDict], Awaitable[tuple[bool, JSONDict]]]


# ------------------------------------------------------------------------ payloads


def _short(run_id: str) -> str:
    return run_id[:12]


def payload(event: str, run: RunRecord, *, at: float, step: str | None = None,
            step_error: str | None = None, waiting: JSONDict | None = None) -> JSONDict:
    """The JSON sent for an event of ``run`` (see the module docstring).  For
    ``run_failed``, ``step`` and ``step_error``: the first step that failed.  For
    ``approval_waiting``, ``waiting``: what the step asks (its ``wait`` note)."""
    name = f"{run.workflow}@{run.version}"
    where = f"run {_short(run.run_id)} of {name}"
    if event == "run_failed":
        why = (f"step {step}: {step_error}" if step is not None and step_error
               else run.error)
        text = f"plait: {where} failed" + (f": {_one_line(why)}" if why else "")
    elif event == "approval_waiting":
        prompt = (waiting or {}).get("prompt")
        text = f"plait: {where} is waiting for approval of step {step}" + (
            f": {_one_line(prompt)}" if isinstance(prompt, str) and prompt else "")
    elif event == "sla_breached":
        start = run.started_at if run.started_at is not None else run.created_at
        end = run.finished_at if run.finished_at is not None else at
        text = (f"plait: {where} passed its SLA of {format_duration(run.sla or 0.0)} "
                f"({run.status} after {format_duration(max(0.0, end - start))})")
    else:
        text = f"plait: {event} on {where}"
    out: JSONDict = {"event": event, "run_id": run.run_id, "workflow": run.workflow,
                     "version": run.version, "status": str(run.status), "text": text,
                     "at": iso(at)}
    if step is not None:
        out["step"] = step
    if event == "run_failed" and run.error is not None:
        out["error"] = run.error
    if step_error is not None:
        out["step_error"] = step_error
    if event == "approval_waiting":
        out["prompt"] = (waiting or {}).get("prompt")
        out["show"] = (waiting or {}).get("show")
    return out


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 1] + "…"


# ------------------------------------------------------------------------ delivery


class Notifier:
    """Delivers notifications for one store; also a run observer
    (``runtime.observers``) that watches the runs having targets."""

    def __init__(self, store: Store, *, policy: NetworkPolicy | None = None,
                 targets: Sequence[Target] = (),
                 clock: Callable[[], float] = time.time,
                 trust: TrustPolicy | None = None) -> None:
        self.store = store
        self.policy = policy or NetworkPolicy.from_environment()
        # the server's rules: a definition's `call:` targets they refuse are dropped
        self.trust = trust
        self.targets = list(targets)  # process-wide (PLAIT_NOTIFY)
        self.clock = clock
        self._definitions: dict[str, list[Target]] = {}  # by fingerprint

    def targets_of(self, checked: CheckedWorkflow) -> list[Target]:
        """The definition's targets and the process-wide ones."""
        return self.targets_for(checked.fingerprint, checked.spec.notify)

    def targets_for(self, fingerprint: str, notify: JSON) -> list[Target]:
        """The targets of a definition (its fingerprint, its ``notify:`` as written)
        and the process-wide ones."""
        own = self._definitions.get(fingerprint)
        if own is None:
            own = self._definitions[fingerprint] = self._allowed(parse_targets(notify)[0])
        return own + self.targets if self.targets else own

    def _allowed(self, targets: list[Target]) -> list[Target]:
        """``targets`` of a definition, without the calls the rules refuse."""
        trust = self.trust
        if trust is None:
            return targets
        kept = [t for t in targets if t.call is None or _callable(t.call, trust)]
        if len(kept) < len(targets):
            _log.warning("notify: %d call target(s) refused by the rules for untrusted "
                         "definitions, not called", len(targets) - len(kept))
        return kept

    def watch(self, run: RunRecord, checked: CheckedWorkflow) -> _RunNotices | None:
        targets = self.targets_of(checked)
        if not targets:
            return None
        return _RunNotices(self, run, targets)

    async def notify(self, event: str, run: RunRecord, targets: Sequence[Target], *,
                     step: str | None = None, step_error: str | None = None,
                     waiting: JSONDict | None = None) -> None:
        """Deliver ``event`` of ``run`` to each of ``targets`` that asks for it, once
        (see the module docstring).  Never raises."""
        wanted = [t for t in targets if event in t.events]
        if not wanted:
            return
        body = payload(event, run, at=self.clock(), step=step, step_error=step_error,
                       waiting=waiting)
        keyed = None if event == "run_failed" else step  # a run fails once
        await asyncio.gather(*(self._deliver(t, NotificationKey(
            run_id=run.run_id, event=event, step=keyed or "", target=t.key), body,
            run.run_id) for t in wanted))

    async def _deliver(self, target: Target, key: NotificationKey, body: JSONDict,
                       run_id: str | None) -> None:
        try:
            if not await self.store.claim_notification(key, self.clock()):
                return  # another process delivers it (or did)
        except StoreError as exc:
            _log.warning("notification %s of run %s to %s: could not claim it (%s); "
                         "not sent", key.event, key.run_id, target.shown, exc,
                         extra={"run_id": run_id, "event": key.event,
                                "step_id": key.step or None, "target": target.shown})
            return
        delay = RETRY_DELAY_S
        for attempt in range(1, ATTEMPTS + 1):
            ok, detail = await self._send(target, body)
            note: JSONDict = {"event": key.event, "target": target.shown,
                              "attempt": attempt, "ok": ok, **detail}
            if key.step:
                note["step"] = key.step
            await self._record(run_id, key.step or None, note)
            if ok:
                return
            if detail.get("final"):
                break
            if attempt < ATTEMPTS:
                await asyncio.sleep(delay)
                delay *= 2
        _log.warning("notification %s of run %s to %s failed: %s", key.event,
                     key.run_id, target.shown, detail.get("error"),
                     extra={"run_id": run_id, "event": key.event,
                            "step_id": key.step or None, "target": target.shown})

    async def _send(self, target: Target, body: JSONDict) -> tuple[bool, JSONDict]:
        try:
            if target.url is not None:
                return await self._post(target.url, body)
            return await self._call(str(target.call), body)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a failed delivery is data, not a crash
            return False, {"error": f"{type(exc).__name__}: {exc}"}

    async def _post(self, url: str, body: JSONDict) -> tuple[bool, JSONDict]:
        import httpx  # only when a URL is notified (docs/startup.md)

        from ..steps.netclient import guarded_client

        timeout = httpx.Timeout(TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
        try:
            async with guarded_client(self.policy, timeout=timeout) as client:
                response = await client.post(url, json=body)
        except NetworkRefused as exc:
            return False, {"error": f"NetworkRefused: {exc}", "final": True}
        except httpx.HTTPError as exc:
            return False, {"error": f"{type(exc).__name__}: {exc}"}
        ok = response.status_code < 300
        out: JSONDict = {"status_code": response.status_code}
        if not ok:
            out["error"] = f"HTTP {response.status_code}"
        return ok, out

    async def _call(self, call: str, body: JSONDict) -> tuple[bool, JSONDict]:
        module_name, _, attr = call.partition(":")
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
        if inspect.iscoroutinefunction(target):
            await target(dict(body))
        else:
            result = await asyncio.to_thread(target, dict(body))
            if inspect.isawaitable(result):
                await result
        return True, {}

    async def _record(self, run_id: str | None, step: str | None, note: JSONDict) -> None:
        if run_id is None:
            return
        note = {k: v for k, v in note.items() if k != "final"}
        try:
            await self.store.write(WriteBatch(run_id, notes=[(step, {"notification": note})]))
        except StoreError as exc:
            _log.warning("run %s: could not record a notification in its history (%s)",
                         run_id, exc)


def _callable(call: str, trust: TrustPolicy) -> bool:
    """Whether the rules allow calling ``call`` (its module first, then where the
    function is defined: importing only an allowed module)."""
    if call_problem(call, "", trust):
        return False
    try:
        import_untrusted_call(call)
    except ImportError:
        return False
    return True


def _asked(batch: WriteBatch, step: str) -> JSONDict | None:
    """What ``step`` asks, from the ``wait`` note stored with it starting to wait."""
    for note_step, data in reversed(batch.notes):
        wait = data.get("wait")
        if note_step == step and isinstance(wait, dict):
            return wait
    return None


class _RunNotices:
    """One run's watch: its events, and the deliveries they started (awaited when the
    engine stops driving the run)."""

    def __init__(self, notifier: Notifier, run: RunRecord, targets: list[Target]) -> None:
        self._notifier = notifier
        self._run = run
        self._targets = targets
        self._tasks: set[asyncio.Task[None]] = set()
        self._sla_sent = False
        self._failed: tuple[str, str | None] | None = None  # the first step that failed
        self._sla_timer: asyncio.TimerHandle | None = None
        if run.sla is not None and any("sla_breached" in t.events for t in targets):
            start = run.started_at if run.started_at is not None else run.created_at
            due = max(0.0, start + run.sla - notifier.clock())
            self._sla_timer = asyncio.get_running_loop().call_later(due, self._sla_due)

    def _spawn(self, event: str, step: str | None = None,
               step_error: str | None = None, waiting: JSONDict | None = None) -> None:
        task = asyncio.get_running_loop().create_task(self._notifier.notify(
            event, self._run, self._targets, step=step, step_error=step_error,
            waiting=waiting))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _sla_due(self) -> None:
        self._sla_timer = None
        if self._run.status not in FINAL_RUN_STATES and not self._sla_sent:
            self._sla_sent = True
            self._spawn("sla_breached")

    def batch(self, batch: WriteBatch) -> None:
        for change in batch.steps:
            if change.target is StepStatus.WAITING and change.source is not StepStatus.WAITING:
                asked = _asked(batch, change.step)
                if asked is None or asked.get("kind") in (None, "approval"):
                    self._spawn("approval_waiting", change.step, waiting=asked)
            elif change.target is StepStatus.FAILED and self._failed is None:
                self._failed = (change.step, change.row.error)
        run_change = batch.run
        if run_change is not None and run_change.target is RunStatus.FAILED:
            step, error = self._failed or (None, None)
            self._spawn("run_failed", step, error)

    async def close(self, run: RunRecord) -> None:
        if self._sla_timer is not None:
            self._sla_timer.cancel()
            self._sla_timer = None
        if not self._sla_sent and run.sla is not None:
            from .sla import breach_of

            if breach_of(run, now=self._notifier.clock()) is not None:
                self._sla_sent = True
                self._spawn("sla_breached")
        while self._tasks:
            await asyncio.gather(*list(self._tasks))


async def notify_sla_breaches(notifier: Notifier, *, now: float | None = None,
                              limit: int = 1000) -> int:
    """Deliver ``sla_breached`` for every run past its SLA among the newest ``limit``
    runs, whatever process drives them (a run waiting for a person is driven by none):
    what a server or scheduler calls now and then.  Once per run and target, as
    always.  Returns how many breaches had targets."""
    from .sla import breaches

    now = notifier.clock() if now is None else now
    found = await breaches(notifier.store, now=now, limit=limit)
    count = 0
    for breach in found:
        run = await notifier.store.get_run(breach.run_id)
        try:
            stored = await notifier.store.get_workflow(run.workflow, run.version)
        except StoreError:  # a definition no longer stored: the process-wide targets
            targets = notifier.targets
        else:  # its `notify:` as written (checked when it was stored)
            definition = stored.definition
            notify = definition.get("notify") if isinstance(definition, dict) else None
            targets = notifier.targets_for(stored.fingerprint, notify)
        if any("sla_breached" in t.events for t in targets):
            count += 1
            await notifier.notify("sla_breached", run, targets)
    return count


ALERT_WINDOW_S = 3600.0


async def notify_alerts(notifier: Notifier, firings: Sequence[Any],
                        targets_of: Callable[[str], Sequence[Target]], *,
                        now: float | None = None, window: float = ALERT_WINDOW_S) -> None:
    """Deliver ``alert`` for each firing (``observe.alerts.Firing``) to the targets
    ``targets_of(workflow)`` gives: once per rule, workflow and target in each
    ``window`` seconds (a rule that keeps firing notifies again an hour later, not on
    every check).  An alert has no run: deliveries are logged, not recorded in a
    history."""
    now = notifier.clock() if now is None else now
    bucket = int(now // window)
    jobs = []
    for firing in firings:
        wanted = [t for t in targets_of(firing.workflow) if "alert" in t.events]
        body: JSONDict = {"event": "alert", "run_id": None, "workflow": firing.workflow,
                          "version": None, "status": "firing",
                          "text": f"plait: alert on {_one_line(firing.message())}",
                          "at": iso(now), "rule": firing.rule.text,
                          "observed": firing.observed, "threshold": firing.threshold}
        if firing.step is not None:
            body["step"] = firing.step
        for target in wanted:
            key = NotificationKey(run_id=f"alert:{firing.workflow}", event="alert",
                                  step=f"{firing.rule.text}@{bucket}", target=target.key)
            jobs.append(notifier._deliver(target, key, body, None))
    await asyncio.gather(*jobs)


async def stored_targets(store: Store, workflows: Iterable[str]) -> dict[str, list[Target]]:
    """The ``notify:`` targets of the latest stored definition of each of
    ``workflows`` (unknown workflows, or bad lists, have none)."""
    found: dict[str, list[Target]] = {}
    for name in workflows:
        try:
            record = await store.get_workflow(name)
        except StoreError:
            continue
        found[name] = parse_targets(record.definition.get("notify"))[0]
    return found
