"""``observe.series``: map items named as their map step, and the budget of label
values (first come, first labelled)."""

from __future__ import annotations

from plait.observe.series import OTHER, Labels
from plait.store.observations import series_name


def test_series_names_drop_item_indexes() -> None:
    assert series_name("fetch[12]") == "fetch"
    assert series_name("parent.fetch[3]") == "parent.fetch"
    assert series_name("step2") == "step2"


def test_live_labels_keep_the_first_names_they_meet() -> None:
    labels = Labels(max_workflows=1, max_steps=2)
    assert labels.step("wf", "m[7]") == ("wf", "m")
    assert labels.step("wf", "b") == ("wf", "b")
    assert labels.step("wf", "c") == ("wf", OTHER)
    assert labels.step("wf", "m[8]") == ("wf", "m")
    assert labels.step("other-wf", "a") == (OTHER, OTHER)
    assert labels.workflow("wf") == "wf"
