"""plait: a workflow engine for Python — validated DAGs, eager parallel scheduling,
retries, durable runs."""

from __future__ import annotations

from .core.model import RetryPolicy, StepSpec, WorkflowSpec
from .core.states import RunStatus, StepStatus
from .errors import (
    CircuitOpenError,
    DecisionTaken,
    DefinitionError,
    FatalError,
    HTTPStatusError,
    InputError,
    NetworkRefused,
    OutputError,
    PlaitError,
    Problem,
    RunBusy,
    RunError,
    RunNotFound,
    SchemaVersionError,
    StaleWriteError,
    StepError,
    StepTimeout,
    StoreError,
    TemplateError,
    TransitionError,
    VersionConflict,
    WorkflowNotFound,
)
from .runtime.context import StepContext
from .runtime.results import RunResult, StepResult
from .steps.registry import StepCall, StepType, register_step_type
from .store.shared import StoreHandle, connect
from .workflow import Retry, Workflow

__version__ = "0.1.0"

__all__ = [
    "CircuitOpenError",
    "DecisionTaken",
    "DefinitionError",
    "FatalError",
    "HTTPStatusError",
    "InputError",
    "NetworkRefused",
    "OutputError",
    "PlaitError",
    "Problem",
    "Retry",
    "RetryPolicy",
    "RunBusy",
    "RunError",
    "RunNotFound",
    "RunResult",
    "RunStatus",
    "SchemaVersionError",
    "StaleWriteError",
    "StepCall",
    "StepContext",
    "StepError",
    "StepResult",
    "StepSpec",
    "StepStatus",
    "StepTimeout",
    "StepType",
    "StoreError",
    "StoreHandle",
    "TemplateError",
    "TransitionError",
    "VersionConflict",
    "Workflow",
    "WorkflowNotFound",
    "WorkflowSpec",
    "connect",
    "register_step_type",
]
