"""Garbage-collector tuning while runs execute.

A run keeps every step's row, history and output alive until it ends: hundreds of
thousands of long-lived containers on large runs.  With CPython's default gen-0
threshold (700 allocations) the collector keeps promoting and rescanning them, which
made a 100,000-step run cost twice per step what a 1,000-step run does.  While at least
one run executes in the process, the gen-0 threshold is raised (fewer, larger young
collections; cycles are still collected); the previous thresholds come back when the
last run ends.  ``PLAIT_GC_TUNING=0`` turns this off.
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

RUN_GEN0_THRESHOLD = 50_000

_lock = threading.Lock()
_active = 0
_saved: tuple[int, int, int] | None = None


def _enabled() -> bool:
    return os.environ.get("PLAIT_GC_TUNING", "1").strip().lower() not in ("0", "false", "no")


@contextmanager
def relaxed_gc() -> Iterator[None]:
    """Raise the gen-0 threshold for the duration (nested and concurrent uses count)."""
    global _active, _saved
    if not _enabled():
        yield
        return
    with _lock:
        _active += 1
        if _active == 1:
            _saved = gc.get_threshold()
            first, *rest = _saved
            gc.set_threshold(max(first, RUN_GEN0_THRESHOLD), *rest)
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _saved is not None:
                gc.set_threshold(*_saved)
                _saved = None


@contextmanager
def gc_paused(*, keep: bool = False) -> Iterator[None]:
    """Pause the cyclic garbage collector while building large graphs: they allocate
    hundreds of thousands of containers and create no reference cycles, so full
    collections in the middle are pure cost (2-3x on 100,000 steps).

    With ``keep`` (what is built is kept: a checked workflow, cached), the objects
    allocated meanwhile go straight to the oldest generation when the block ends
    without an error, instead of being scanned by the first collection after it, then
    by the next older one (0.05 s each on 100,000 steps): ``gc.freeze()`` moves every
    tracked object to the permanent generation and ``gc.unfreeze()`` moves them all to
    the oldest one.  Skipped when the program froze objects itself."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
        if keep and enabled and not gc.get_freeze_count():
            gc.freeze()
            gc.unfreeze()
    finally:
        if enabled:
            gc.enable()
