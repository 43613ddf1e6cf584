"""What a backend declares it does (``Store.capabilities``): the runtime asks the store
these questions instead of testing its class.

Each backend sets one ``StoreCapabilities`` value on its class, and the conformance
suite checks that the backend behaves as it declares (``tests/conformance``).  What a
capability adds to ``Store`` (``write_now``, ``notify``) is typed below
(``WritesNow``, ``Notifies``).

=========  ======  ======  ==========
field      memory  SQLite  PostgreSQL
=========  ======  ======  ==========
shared     no      yes     yes
in_process yes     no      no
notify     no      no      yes
=========  ======  ======  ==========
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .records import WriteBatch


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreCapabilities:
    """The answers a backend gives (see the module docstring)."""

    # Other processes share this store's state and may change it meanwhile: a run's
    # driver polls it for cancel requests, approval decisions and its ownership, every
    # batch carries the owner fence (``WriteBatch.owner``), and state meant for every
    # process (circuit breakers) is kept in the store.  False: the state is this
    # process's own, and nobody else can take a run over.
    shared: bool
    # The state lives in this process's memory and every call completes without I/O:
    # the store is a ``WritesNow`` (the run loop commits without awaiting), and
    # a run is released at once when its loop ends.
    in_process: bool
    # The store is a ``Notifies``: ``notify`` wakes listeners in other processes
    # (PostgreSQL's NOTIFY), so workers can listen instead of polling.
    notify: bool


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
