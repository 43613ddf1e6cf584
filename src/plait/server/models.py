"""The API's request bodies and responses (pydantic v2): what /docs shows."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ErrorDetail(BaseModel):
    code: str
    message: str
    details: Any = None


class ErrorBody(BaseModel):
    error: ErrorDetail


class Health(BaseModel):
    status: str = "ok"


class WorkflowSummary(BaseModel):
    name: str
    version: int
    fingerprint: str
    created_at: str | None


class WorkflowCreated(BaseModel):
    name: str
    version: int
    fingerprint: str


class WorkflowDetail(BaseModel):
    name: str
    version: int
    fingerprint: str
    created_at: str | None
    definition: dict[str, Any]
    versions: list[int]


class RunCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workflow: str = Field(description='"name" (latest version) or "name@V"',
                          examples=["support-router", "support-router@2"])
    input: Any = Field(default_factory=dict, description="the run's input (JSON)")


class RunCreated(BaseModel):
    run_id: str
    status: str


class RunSummary(BaseModel):
    run_id: str
    workflow: str
    version: int
    status: str
    created_at: str | None
    started_at: str | None
    finished_at: str | None
    duration_s: float | None
    error: str | None
    retry_of: str | None
    parent_run_id: str | None = Field(description="the run whose `workflow` or `loop` "
                                                  "step started this one; null for a "
                                                  "top-level run")


class RunPage(BaseModel):
    runs: list[RunSummary]
    next: str | None = Field(description="the cursor of the next page (`before=`), or null "
                                         "on the last page")


class RetryBody(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    from_: str | None = Field(default=None, alias="from",
                              description="re-run this step and what depends on it")
    input: Any = Field(default=None, description="a new input (default: the old run's)")


class RetryCreated(BaseModel):
    run_id: str


class ApproveBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    approved: bool = True
    data: Any = None
    by: str | None = Field(default=None, description="who decides (default: api)")


class SignalBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    data: Any = Field(default=None, description="what the waits for the event get")


class Signalled(BaseModel):
    run_id: str
    event: str


class Accepted(BaseModel):
    run_id: str
    status: str
    cancel_requested: bool


class Decision(BaseModel):
    run_id: str
    step: str
    decision: str


class Login(BaseModel):
    model_config = ConfigDict(extra="forbid")

    token: str = Field(max_length=4096)


class SessionState(BaseModel):
    authenticated: bool
    auth_required: bool


class HookStarted(BaseModel):
    run_id: str
    duplicate: bool = Field(default=False, description="true when this delivery id was "
                            "received already: run_id is the run it started")
