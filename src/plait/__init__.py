"""plait: a workflow engine for Python — validated DAGs, eager parallel scheduling,
retries, durable runs."""

from __future__ import annotations

from .core.model import RetryPolicy, StepSpec, WorkflowSpec
from .core.states import RunStatus, StepStatus
from .errors import (
    CircuitOpenError,
    DefinitionError,
    FatalError,
    InputError,
    OutputError,
    PlaitError,
    Problem,
    StepError,
    StepTimeout,
    TemplateError,
)
from .runtime.context import StepContext
from .runtime.results import RunResult, StepResult
from .steps.registry import StepCall, StepType, register_step_type
from .workflow import Retry, Workflow

__version__ = "0.1.0"

__all__ = [
    "CircuitOpenError",
    "DefinitionError",
    "FatalError",
    "InputError",
    "OutputError",
    "PlaitError",
    "Problem",
    "Retry",
    "RetryPolicy",
    "RunResult",
    "RunStatus",
    "StepCall",
    "StepContext",
    "StepError",
    "StepResult",
    "StepSpec",
    "StepStatus",
    "StepTimeout",
    "StepType",
    "TemplateError",
    "Workflow",
    "WorkflowSpec",
    "register_step_type",
]
