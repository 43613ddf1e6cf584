"""GC tuning is scoped to executing runs: nested uses count, thresholds come back."""

from __future__ import annotations

import gc

import pytest

from plait import Workflow
from plait.runtime.gctune import RUN_GEN0_THRESHOLD, gc_paused, relaxed_gc


def test_thresholds_are_raised_inside_and_restored_after_the_last_use() -> None:
    before = gc.get_threshold()
    with relaxed_gc():
        assert gc.get_threshold()[0] == max(before[0], RUN_GEN0_THRESHOLD)
        with relaxed_gc():
            assert gc.get_threshold()[0] == max(before[0], RUN_GEN0_THRESHOLD)
        assert gc.get_threshold()[0] == max(before[0], RUN_GEN0_THRESHOLD)  # still one in
    assert gc.get_threshold() == before


def test_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLAIT_GC_TUNING", "0")
    before = gc.get_threshold()
    with relaxed_gc():
        assert gc.get_threshold() == before


def test_a_run_leaves_the_thresholds_as_it_found_them() -> None:
    seen: list[int] = []

    def probe() -> int:
        seen.append(gc.get_threshold()[0])
        return 1

    before = gc.get_threshold()
    wf = Workflow("gc-probe")
    wf.add_step("probe", probe)
    assert wf.run().status == "completed"
    assert seen == [max(before[0], RUN_GEN0_THRESHOLD)]
    assert gc.get_threshold() == before


def test_gc_paused_with_keep_restores_the_collector() -> None:
    assert gc.isenabled()
    with gc_paused(keep=True):
        assert not gc.isenabled()
        kept = [[i] for i in range(1000)]
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert all(gc.is_tracked(k) for k in kept)
    gc.freeze()  # a program that froze objects itself keeps them frozen
    try:
        frozen = gc.get_freeze_count()
        with gc_paused(keep=True):
            pass
        # not unfrozen (which would empty it); a few frozen objects that other
        # threads of a long test session free meanwhile leave it, so no equality
        assert gc.get_freeze_count() > frozen // 2 > 0
    finally:
        gc.unfreeze()
