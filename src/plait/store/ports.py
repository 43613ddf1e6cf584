"""What a store offers beyond ``Store`` when its capabilities say so
(``store.capabilities``): the runtime checks the capability, then uses the store as
one of these."""

from __future__ import annotations

from typing import Protocol

from .base import WriteBatch


class WritesNow(Protocol):
    """A store whose capabilities have ``in_process``."""

    def write_now(self, batch: WriteBatch) -> None:
        """``Store.write``, completed before it returns (the same checks, the same
        errors)."""


class Notifies(Protocol):
    """A store whose capabilities have ``notify``."""

    async def notify(self, channel: str, payload: str = "") -> None:
        """Wake the listeners of ``channel`` in every process, about something already
        committed (a wake-up only: a listener reads the store to learn what changed)."""
