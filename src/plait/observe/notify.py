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
     "at": ISO-8601 UTC,
     "id": str}              # the idempotency key (also the header Idempotency-Key)

At least once (``observe.notify_outbox``): each notification is a row of the store's
outbox (``store.outbox``), stored with the batch whose events cause it
(``_RunNotices.prepare``: a committed event has its notification committed) or, for an
SLA timer and an alert, by itself; its id, stable for (run, event, step, target),
makes it once however many processes see the event (an id stored already is not
stored again).  Any sender (every worker; a process driving the run when it stops
driving it) claims due rows with a lease, sends, and settles them, retrying with a
doubling delay across restarts; a drain hands unsent rows to the next sender.  Every
attempt is recorded in the run's history as a note ``{"notification": {"event",
"target", "attempt", "ok", "id", "status_code"?, "error"?}}`` (``target``: a URL cut
to its scheme and host, or the ``module:function``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import time
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any

from ..core.durations import format_duration
from ..core.model import JSON, JSONDict
from ..core.states import FINAL_RUN_STATES, RunStatus, StepStatus
from ..core.timestamps import iso
from ..core.trust import TrustPolicy, call_problem
from ..core.validate import CheckedWorkflow
from ..errors import StoreError
from ..steps.binding import import_untrusted_call
from ..steps.netpolicy import NetworkPolicy
from ..store.base import OutboxRow, RunRecord, Store, WriteBatch
from .notify_outbox import ATTEMPTS, RETRY_DELAY_S, OutboxSender
from .notify_targets import (
    ENV,
    EVENTS,
    Target,
    check_targets,
    parse_targets,
    targets_from_environment,
)

__all__ = ["ATTEMPTS", "ENV", "EVENTS", "RETRY_DELAY_S", "Notifier", "Target",
           "check_targets", "notification_id", "parse_targets", "targets_from_environment"]

_log = logging.getLogger("plait.notify")


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
        self.sender = OutboxSender(store, policy=self.policy, clock=clock)

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

    def rows(self, event: str, run: RunRecord, targets: Sequence[Target], *,
             step: str | None = None, step_error: str | None = None,
             waiting: JSONDict | None = None) -> list[OutboxRow]:
        """The outbox rows of ``event`` of ``run``: one per target that asks for it."""
        wanted = [t for t in targets if event in t.events]
        if not wanted:
            return []
        now = self.clock()
        body = payload(event, run, at=now, step=step, step_error=step_error,
                       waiting=waiting)
        keyed = None if event == "run_failed" else step  # a run fails once
        return [outbox_row(target, body, run.run_id, event, keyed or "", now,
                           untrusted=self.trust is not None)
                for target in wanted]

    async def notify(self, event: str, run: RunRecord, targets: Sequence[Target], *,
                     step: str | None = None, step_error: str | None = None,
                     waiting: JSONDict | None = None) -> None:
        """Store ``event`` of ``run`` in the outbox for each of ``targets`` that asks for
        it, once (see the module docstring), and send what is due.  Never raises."""
        await self.send(self.rows(event, run, targets, step=step, step_error=step_error,
                                  waiting=waiting))

    async def send(self, rows: Sequence[OutboxRow]) -> None:
        """Store ``rows`` (those not stored already) and send them until each is sent,
        given up, or held by another sender.  Never raises."""
        if not rows:
            return
        try:
            await self.store.enqueue_notifications(rows)
        except StoreError as exc:
            _log.warning("notification %s of run %s: could not store it (%s); not sent",
                         rows[0].event, rows[0].run_id, exc,
                         extra={"run_id": rows[0].run_id, "event": rows[0].event})
            return
        await self.flush([r.id for r in rows])

    async def flush(self, ids: Sequence[str]) -> None:
        """Send stored rows until each of ``ids`` is sent, given up, or held by another
        sender.  Never raises (a failure leaves them in the outbox)."""
        try:
            await self.sender.send_until_settled(ids)
        except StoreError as exc:
            _log.warning("notifications: could not send (%s); they stay in the outbox "
                         "for the next sender", exc)


def notification_id(run_id: str, event: str, step: str, target: Target) -> str:
    """The idempotency key of a notification: stable for (run, event, step, target)."""
    text = "\x1f".join((run_id, event, step, target.key))
    return "ntf-" + hashlib.sha256(text.encode()).hexdigest()[:32]


def outbox_row(target: Target, body: JSONDict, run_id: str, event: str, step: str,
               now: float, *, has_run: bool = True, untrusted: bool = False) -> OutboxRow:
    """A notification of ``body`` to ``target``.  ``untrusted``: stored by a process
    judging runs by the untrusted rules (``plait serve``): a URL is sent under the
    untrusted network policy, whichever process sends it."""
    key = notification_id(run_id, event, step, target)
    sent_to: JSONDict = {"url": target.url} if target.url is not None \
        else {"call": str(target.call)}
    if untrusted and target.url is not None:
        sent_to["policy"] = "untrusted"
    return OutboxRow(id=key, run_id=run_id if has_run else None, event=event, step=step,
                     target=sent_to,
                     shown=target.shown, body={**body, "id": key}, next_at=now,
                     created_at=now)


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
    """One run's watch: the notifications its batches cause, stored with them
    (``prepare``), sent once stored (``batch``), and sent until settled when the engine
    stops driving the run (``close``)."""

    def __init__(self, notifier: Notifier, run: RunRecord, targets: list[Target]) -> None:
        self._notifier = notifier
        self._run = run
        self._targets = targets
        self._tasks: set[asyncio.Task[None]] = set()
        self._ids: list[str] = []  # this run's rows, sent by ``close`` at the latest
        self._sla_sent = False
        self._failed: tuple[str, str | None] | None = None  # the first step that failed
        self._sla_timer: asyncio.TimerHandle | None = None
        if run.sla is not None and any("sla_breached" in t.events for t in targets):
            start = run.started_at if run.started_at is not None else run.created_at
            due = max(0.0, start + run.sla - notifier.clock())
            self._sla_timer = asyncio.get_running_loop().call_later(due, self._sla_due)

    def _spawn(self, job: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(job)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _sla_due(self) -> None:
        self._sla_timer = None
        if self._run.status not in FINAL_RUN_STATES and not self._sla_sent:
            self._sla_sent = True
            self._spawn(self._notifier.notify("sla_breached", self._run, self._targets))

    def prepare(self, batch: WriteBatch) -> None:
        """Add the notifications of ``batch``'s events to it (``WriteBatch.outbox``):
        stored in its transaction, or not at all."""
        rows: list[OutboxRow] = []
        notifier, run = self._notifier, self._run
        for change in batch.steps:
            if change.target is StepStatus.WAITING and change.source is not StepStatus.WAITING:
                asked = _asked(batch, change.step)
                if asked is None or asked.get("kind") in (None, "approval"):
                    rows += notifier.rows("approval_waiting", run, self._targets,
                                          step=change.step, waiting=asked)
            elif change.target is StepStatus.FAILED and self._failed is None:
                self._failed = (change.step, change.row.error)
        run_change = batch.run
        if run_change is not None and run_change.target is RunStatus.FAILED:
            step, error = self._failed or (None, None)
            failed = dataclasses.replace(run, status=RunStatus.FAILED, error=run_change.error,
                                         finished_at=run_change.at)
            rows += notifier.rows("run_failed", failed, self._targets, step=step,
                                  step_error=error)
        if rows:
            batch.outbox = [*batch.outbox, *rows]

    def batch(self, batch: WriteBatch) -> None:
        ids = [row.id for row in batch.outbox if row.run_id == self._run.run_id]
        if ids:
            self._ids += ids
            self._spawn(self._notifier.flush(ids))

    async def close(self, run: RunRecord) -> None:
        if self._sla_timer is not None:
            self._sla_timer.cancel()
            self._sla_timer = None
        if not self._sla_sent and run.sla is not None:
            from .sla import breach_of

            if breach_of(run, now=self._notifier.clock()) is not None:
                self._sla_sent = True
                self._spawn(self._notifier.notify("sla_breached", run, self._targets))
        while self._tasks:
            await asyncio.gather(*list(self._tasks))
        if self._ids:  # any of them still due (a retry): sent, or left to the next sender
            await self._notifier.flush(self._ids)


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
    rows: list[OutboxRow] = []
    for firing in firings:
        wanted = [t for t in targets_of(firing.workflow) if "alert" in t.events]
        body: JSONDict = {"event": "alert", "run_id": None, "workflow": firing.workflow,
                          "version": None, "status": "firing",
                          "text": f"plait: alert on {_one_line(firing.message())}",
                          "at": iso(now), "rule": firing.rule.text,
                          "observed": firing.observed, "threshold": firing.threshold}
        if firing.step is not None:
            body["step"] = firing.step
        rows += [outbox_row(target, body, f"alert:{firing.workflow}", "alert",
                            f"{firing.rule.text}@{bucket}", notifier.clock(), has_run=False)
                 for target in wanted]
    await notifier.send(rows)


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
