"""The id of a child run, derived from its parent: the same step of the same run
starts the same child, so a resumed parent finds the child it started before, and a
reader (``plait show``, the metrics) finds a step's children without a query."""

from __future__ import annotations

import uuid

_NAMESPACE = uuid.UUID("5f0c7c1e-8d0e-4c56-9d51-6a4f1f1e0b2a")


def child_run_id(parent_run_id: str, step_id: str, key: str) -> str:
    """The id of the child run that step ``step_id`` of ``parent_run_id`` starts for
    ``key`` (``"0"`` for a ``workflow`` step, the iteration for a ``loop``)."""
    return uuid.uuid5(_NAMESPACE, f"{parent_run_id}/{step_id}/{key}").hex


CHILD_END_PREFIX = "child/"  # no event a person sends has a "/" in its name


def child_end_event(child_run_id: str) -> str:
    """The internal name of what a step waiting for child run ``child_run_id`` waits
    for: its end.  Nobody can send it (an event name has no "/")."""
    return CHILD_END_PREFIX + child_run_id


def ended_child(name: str) -> str | None:
    """The child run whose end ``name`` (a ``child_end_event``) is, else None."""
    return name[len(CHILD_END_PREFIX):] if name.startswith(CHILD_END_PREFIX) else None
