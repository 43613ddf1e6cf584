"""Stores, chosen by URL: ``memory://``, ``sqlite:///path.db``, ``postgresql://...``."""

from __future__ import annotations

from .base import (
    AttemptRecord,
    EventRecord,
    InboxOutcome,
    Lease,
    RunChange,
    RunFilter,
    RunRecord,
    StepRecord,
    Store,
    Ticket,
    TicketRecord,
    WorkflowRecord,
    WriteBatch,
)
from .memory import MemoryStore
from .url import open_store

__all__ = ["AttemptRecord", "EventRecord", "Lease", "MemoryStore", "InboxOutcome", "RunChange",
           "RunFilter", "RunRecord", "StepRecord", "Store", "Ticket", "TicketRecord",
           "WorkflowRecord", "WriteBatch", "open_store"]
