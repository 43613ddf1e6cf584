"""``RunHost``: what a run loop needs of the process that drives it.

The Engine is one, as it stands (a worker process driving runs of a cluster would be
another).  The loop is given this, not the Engine, so the loop imports nothing of the
engine: the engine imports the loop, and the dependency points one way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from ..steps.registry import Services
from ..store.base import Store
from .writer import Listener


class RunHost(Protocol):
    @property
    def store(self) -> Store: ...

    @property
    def services(self) -> Services: ...  # lent to step types (threads, network policy)

    @property
    def worker(self) -> str: ...  # who the history and the run's lease name

    @property
    def clock(self) -> Callable[[], float]: ...

    @property
    def rand(self) -> Callable[[], float]: ...  # retry jitter

    @property
    def listeners(self) -> Sequence[Listener]: ...  # told of every committed batch

    @property
    def preparers(self) -> Sequence[Listener]: ...  # given every batch before its write
