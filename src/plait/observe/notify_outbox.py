"""Sending the notification outbox (docs/notifications.md): ``OutboxSender`` claims
due rows of ``Store.claim_notifications`` with a lease, sends each (a JSON ``POST``
with the header ``Idempotency-Key``, or a call of a function), records the attempt in
the run's history, and settles the row: ``sent``; ``pending`` again with the next try
``RETRY_DELAY_S * 2**(attempt - 1)`` seconds later; or, after ``ATTEMPTS`` attempts
(or a refusal of the network policy, final at once), ``given_up``, logged as a warning
and kept (``plait notifications``).

Every worker (so ``plait serve`` too) runs ``OutboxSender.run``; a process driving a
run sends that run's rows when it stops driving it (``send_until_settled``).  A
sender that stops (a drain) releases the rows it holds, unchanged, for the next
sender; one killed holds them until its lease ends (``LEASE_S``, or
``PLAIT_NOTIFY_LEASE`` seconds).  A row may so be sent twice (the receiver saw it,
the sender died before settling it), always with the same key: receivers dedupe on
it.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from ..core.model import JSONDict
from ..errors import NetworkRefused, StoreError
from ..steps.netpolicy import NetworkPolicy
from ..store.base import OutboxRow, Store, WriteBatch

__all__ = ["ATTEMPTS", "LEASE_S", "RETRY_DELAY_S", "OutboxSender", "next_try_in"]

ATTEMPTS = 3
RETRY_DELAY_S = 0.5  # then 1 s: a notification gives up within about 1.5 s plus requests
TIMEOUT_S, CONNECT_TIMEOUT_S = 10.0, 5.0  # per request
LEASE_S = 60.0  # a held row's lease: longer than any request (TIMEOUT_S)
LEASE_ENV = "PLAIT_NOTIFY_LEASE"
POLL_S = 2.0  # how often a worker's sender looks for due rows
BATCH = 20  # rows claimed at a time
HEADER = "Idempotency-Key"
REMEMBERED = 10_000  # outcomes a sender keeps for the callers waiting for them
_log = logging.getLogger("plait.notify")


def next_try_in(attempt: int) -> float:
    """Seconds from failed attempt ``attempt`` (1, 2, ...) to the next."""
    return float(RETRY_DELAY_S * 2.0 ** (attempt - 1))


def lease_from_environment() -> float:
    text = os.environ.get(LEASE_ENV, "").strip()
    try:
        value: float = float(text) if text else LEASE_S
    except ValueError:
        _log.warning("%s=%r is not a number of seconds; using %gs", LEASE_ENV, text,
                     LEASE_S)
        return LEASE_S
    return value if value > 0 else float(LEASE_S)


class OutboxSender:
    """Sends the store's due notifications (see the module docstring)."""

    def __init__(self, store: Store, *, policy: NetworkPolicy | None = None,
                 clock: Callable[[], float] = time.time, name: str | None = None,
                 lease: float | None = None) -> None:
        self.store = store
        self.policy = policy or NetworkPolicy.from_environment()
        self.clock = clock
        self.name = name or f"notify-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.lease = lease if lease is not None else lease_from_environment()
        self.settled: dict[str, tuple[str, float]] = {}  # id -> (state, next_at)

    async def run(self, poll: float = POLL_S) -> None:
        """Send due rows until cancelled, then release what it holds."""
        try:
            while True:
                try:
                    sent = await self.pump()
                except StoreError as exc:
                    _log.warning("notifications: could not claim due ones (%s); trying "
                                 "again in %gs", exc, poll)
                    sent = 0
                self.settled.clear()  # nobody waits for what this loop settles
                if sent < BATCH:
                    await asyncio.sleep(poll)
        finally:
            await self.release()

    async def release(self) -> None:
        """Hand every row held back, unchanged, to the next sender."""
        try:
            count = await asyncio.shield(self.store.release_notifications(self.name))
        except (StoreError, asyncio.CancelledError) as exc:
            _log.warning("notifications: could not release the rows of %s (%s); they "
                         "are sent again once its lease ends", self.name, exc)
            return
        if count:
            _log.info("notifications: %d handed over by %s, unsent", count, self.name)

    async def pump(self) -> int:
        """Claim the due rows (up to ``BATCH``), send and settle each; how many."""
        rows = await self.store.claim_notifications(self.name, self.clock(), self.lease,
                                                    BATCH)
        await asyncio.gather(*(self._attempt(row) for row in rows))
        return len(rows)

    async def send_until_settled(self, ids: Iterable[str]) -> None:
        """Send due rows, waiting out retries, until each of ``ids`` is sent or given
        up by this sender, or held by another (which sends it).  Releases what it
        holds if cancelled."""
        asked = wanted = set(ids)
        try:
            while wanted:
                # other rows may be due first: claim until these are, or none is left
                while await self.pump() == BATCH and not wanted <= self.settled.keys():
                    pass
                wanted = {i for i in wanted
                          if self.settled.get(i, ("", 0.0))[0] not in ("sent", "given_up")}
                retries = [self.settled[i][1] for i in wanted if i in self.settled]
                if not retries or len(retries) < len(wanted):
                    return  # a row another sender holds (or took over): it sends it
                await asyncio.sleep(max(0.0, min(retries) - self.clock()))
                # rows given to this sender again are those it retries: forget the old
                for i in wanted:
                    self.settled.pop(i, None)
        except asyncio.CancelledError:
            await self.release()
            raise
        finally:  # what this sender remembers stays small however long it lives
            for i in asked:
                self.settled.pop(i, None)
            if len(self.settled) > REMEMBERED:
                self.settled.clear()

    async def _attempt(self, row: OutboxRow) -> None:
        ok, detail = await self._send(row)
        attempt = row.attempts + 1
        now = self.clock()
        error = None if ok else str(detail.get("error"))
        if ok:
            state, next_at = "sent", now
        elif detail.get("final") or attempt >= ATTEMPTS:
            state, next_at = "given_up", now
        else:
            state, next_at = "pending", now + next_try_in(attempt)
        note: JSONDict = {"event": row.event, "target": row.shown, "attempt": attempt,
                          "ok": ok, "id": row.id,
                          **{k: v for k, v in detail.items() if k != "final"}}
        if row.step and row.event != "alert":
            note["step"] = row.step
        await self._record(row.run_id, row.step or None, note)
        try:
            kept = await self.store.settle_notification(
                row.id, self.name, state=state, attempts=attempt, next_at=next_at,
                error=error)
        except StoreError as exc:
            _log.warning("notification %s: could not record attempt %d (%s); it is "
                         "sent again once its lease ends", row.id, attempt, exc)
            return
        if not kept:  # its lease ran out and another sender took it
            return
        self.settled[row.id] = (state, next_at)
        if state == "given_up":
            _log.warning("notification %s of run %s to %s given up after %d attempt(s): "
                         "%s", row.event, row.run_id, row.shown, attempt, error,
                         extra={"run_id": row.run_id, "event": row.event,
                                "step_id": row.step or None, "target": row.shown,
                                "notification": row.id})

    async def _send(self, row: OutboxRow) -> tuple[bool, JSONDict]:
        try:
            url, call = row.target.get("url"), row.target.get("call")
            if isinstance(url, str):
                policy = self._untrusted() if row.target.get("policy") == "untrusted" \
                    else self.policy
                return await self._post(url, row.body, row.id, policy)
            return await self._call(str(call), row.body)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a failed delivery is data, not a crash
            return False, {"error": f"{type(exc).__name__}: {exc}"}

    def _untrusted(self) -> NetworkPolicy:
        """The policy of a URL stored by a server: the untrusted one (plus the
        environment), whatever this sender's own."""
        from ..steps.netpolicy import UNTRUSTED

        return NetworkPolicy.from_environment(base=UNTRUSTED)

    async def _post(self, url: str, body: JSONDict, key: str,
                    policy: NetworkPolicy) -> tuple[bool, JSONDict]:
        import httpx  # only when a URL is notified (docs/startup.md)

        from ..steps.netclient import guarded_client

        timeout = httpx.Timeout(TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
        try:
            async with guarded_client(policy, timeout=timeout) as client:
                response = await client.post(url, json=body, headers={HEADER: key})
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
        try:
            await self.store.write(WriteBatch(run_id, notes=[(step, {"notification": note})]))
        except StoreError as exc:
            _log.warning("run %s: could not record a notification in its history (%s)",
                         run_id, exc)
