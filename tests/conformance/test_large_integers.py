"""Integers past what a backend's columns hold (the API bounds most; these reach the
store): a version or an event sequence number that large matches nothing, on every
backend, instead of failing in the driver."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from plait.errors import WorkflowNotFound
from plait.store.base import Store

UID = Callable[[str], str]
DEFINITION = {"name": "wf", "steps": [{"id": "a", "type": "transform", "value": 1}]}


@pytest.mark.parametrize("version", [2**31, 2**63, 10**30, -(2**63) - 1])
async def test_a_version_past_the_columns_is_not_found(store: Store, uid: UID,
                                                       version: int) -> None:
    name = uid("wf")
    await store.save_workflow(name, {**DEFINITION, "name": name}, "aaaaaaaaaaaa", None)
    with pytest.raises(WorkflowNotFound) as caught:
        await store.get_workflow(name, version)
    assert caught.value.versions == (1,) and str(version) in str(caught.value)
