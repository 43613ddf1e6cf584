"""Stores, chosen by URL: ``memory://``, ``sqlite:///path.db``, ``postgresql://...``."""

from __future__ import annotations

from .base import (
    AttemptRecord,
    EventRecord,
    RunChange,
    RunFilter,
    RunRecord,
    StepRecord,
    Store,
    WorkflowRecord,
    WriteBatch,
)
from .memory import MemoryStore
from .url import open_store

__all__ = ["AttemptRecord", "EventRecord", "MemoryStore", "RunChange", "RunFilter",
           "RunRecord", "StepRecord", "Store", "WorkflowRecord", "WriteBatch", "open_store"]
