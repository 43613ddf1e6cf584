"""plait: a workflow engine for Python — validated DAGs, eager parallel scheduling,
retries, durable runs.

The names below load on first use (PEP 562), so ``import plait`` and the command line's
``--help`` do not pay for the engine, Jinja2 or the stores.  Any name but an error
class brings the engine with it: the Workflow module registers the built-in step types
first, so a type registered afterwards (``register_step_type``, a plugin) replaces a
built-in one of the same name, as when everything was imported at once.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .core.model import RetryPolicy, StepSpec, WorkflowSpec
    from .core.states import RunStatus, StepStatus
    from .errors import (
        ApprovalRequested,
        ChildRequested,
        CircuitOpenError,
        DecisionTaken,
        DefinitionError,
        DefinitionRejected,
        EventRequested,
        EventTaken,
        FatalError,
        HTTPStatusError,
        InputError,
        InterruptedAttempt,
        JournalNameReused,
        NetworkRefused,
        OutputError,
        PlaitError,
        Problem,
        ProcessStepFailed,
        RunBusy,
        RunError,
        RunFinished,
        RunLeftUnfinished,
        RunNotFound,
        RunTakenOver,
        SchemaVersionError,
        SleepRequested,
        StaleWriteError,
        StepError,
        StepNotFound,
        StepNotWaiting,
        StepTimeout,
        StoreError,
        StoreUnreachable,
        TemplateError,
        TokenBudgetSpent,
        TransitionError,
        UnstorableValue,
        UntrustedRefused,
        VersionConflict,
        WaitRequested,
        WorkflowNotFound,
    )
    from .runs import (
        approve,
        approve_async,
        get_run,
        get_run_async,
        resume,
        resume_async,
        signal,
        signal_async,
    )
    from .runtime.results import RunResult, StepResult
    from .step_options import Retry
    from .steps.context import StepContext
    from .steps.registry import StepCall, StepType, register_step_type
    from .store.shared import StoreHandle, connect
    from .workflow import Workflow

__version__ = "0.1.0"


__all__ = [
    "ApprovalRequested",
    "ChildRequested",
    "CircuitOpenError",
    "DecisionTaken",
    "DefinitionError",
    "DefinitionRejected",
    "EventRequested",
    "EventTaken",
    "FatalError",
    "HTTPStatusError",
    "InputError",
    "InterruptedAttempt",
    "JournalNameReused",
    "NetworkRefused",
    "OutputError",
    "PlaitError",
    "Problem",
    "ProcessStepFailed",
    "Retry",
    "RetryPolicy",
    "RunBusy",
    "RunError",
    "RunFinished",
    "RunLeftUnfinished",
    "RunNotFound",
    "RunResult",
    "RunStatus",
    "RunTakenOver",
    "SchemaVersionError",
    "SleepRequested",
    "StaleWriteError",
    "StepCall",
    "StepContext",
    "StepError",
    "StepNotFound",
    "StepNotWaiting",
    "StepResult",
    "StepSpec",
    "StepStatus",
    "StepTimeout",
    "StepType",
    "StoreError",
    "StoreHandle",
    "StoreUnreachable",
    "TemplateError",
    "TokenBudgetSpent",
    "TransitionError",
    "UnstorableValue",
    "UntrustedRefused",
    "VersionConflict",
    "WaitRequested",
    "Workflow",
    "WorkflowNotFound",
    "WorkflowSpec",
    "approve",
    "approve_async",
    "connect",
    "get_run",
    "get_run_async",
    "register_step_type",
    "resume",
    "resume_async",
    "signal",
    "signal_async",
]

# where each public name lives (module relative to this package)
_HOMES = {
    "RetryPolicy": ".core.model", "StepSpec": ".core.model", "WorkflowSpec": ".core.model",
    "RunStatus": ".core.states", "StepStatus": ".core.states",
    "StepContext": ".steps.context",
    "RunResult": ".runtime.results", "StepResult": ".runtime.results",
    "StepCall": ".steps.registry", "StepType": ".steps.registry",
    "register_step_type": ".steps.registry",
    "Retry": ".step_options", "Workflow": ".workflow",
    "StoreHandle": ".store.shared", "connect": ".store.shared",
    "approve": ".runs", "approve_async": ".runs", "get_run": ".runs",
    "get_run_async": ".runs", "resume": ".runs", "resume_async": ".runs",
    "signal": ".runs", "signal_async": ".runs",
}


def __getattr__(name: str) -> object:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    home = _HOMES.get(name, ".errors")
    if home != ".errors":
        importlib.import_module(".workflow", __name__)  # the built-in step types first
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value  # the next access is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
