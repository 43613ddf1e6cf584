"""``/api/runs``: start, list (cursor pages), read, cancel, retry, approve."""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse

from ...core.model import JSONDict
from ...core.states import FINAL_RUN_STATES, RunStatus
from ...errors import (
    DecisionTaken,
    DefinitionError,
    EventTaken,
    InputError,
    RunError,
    RunFinished,
    RunNotFound,
    WorkflowNotFound,
)
from ...rundoc.journal import add_journal
from ...rundoc.llm_calls import add_llm, roll_up
from ...rundoc.records import LogRecord, add_child_runs, add_waiting, child_runs, duration
from ...runtime import continuation
from ...runtime.results import iso
from ...store.base import RunFilter, RunRecord
from ..errors import ApiError, not_found
from ..models import (
    Accepted,
    ApproveBody,
    Decision,
    ErrorBody,
    RetryBody,
    RetryCreated,
    RunCreate,
    RunCreated,
    RunPage,
    SignalBody,
    Signalled,
)
from ..run_pages import CURSOR_PARAMETER, STEPS_PER_PAGE, parse_steps_after, run_page
from ..runtime import Closing, ServerRuntime
from .deps import runtime

router = APIRouter(prefix="/api/runs", tags=["runs"])
Runtime = Annotated[ServerRuntime, Depends(runtime)]
DEFAULT_LIMIT = 50
MAX_LIMIT = 500
STATUSES = [str(s) for s in RunStatus]
MAX_VERSION = 2**31 - 1  # what the stores keep a version in
MAX_CURSOR_TIME = 1e12  # epoch seconds: the year 33658
_VERSION = re.compile(r"^[0-9]{1,10}$")
_ERRORS: dict[int | str, dict[str, Any]] = {404: {"model": ErrorBody},
                                            422: {"model": ErrorBody}}


def parse_reference(text: str) -> tuple[str, int | None]:
    """``NAME`` or ``NAME@V`` (V a version: 1 to ``MAX_VERSION``); 422 otherwise."""
    name, at, version = text.partition("@")
    if not at:
        return name, None
    if not _VERSION.match(version) or not 1 <= int(version) <= MAX_VERSION:
        raise ApiError(422, "invalid_request", f"invalid workflow reference {text!r}: "
                       f"expected NAME or NAME@VERSION (a version is an integer from 1 to "
                       f"{MAX_VERSION})",
                       [{"location": "body.workflow", "message": "expected NAME or NAME@V"}])
    return name, int(version)


async def start_run(rt: ServerRuntime, reference: str, input: Any,
                    run_id: str | None = None) -> RunRecord:
    """Start workflow ``reference`` (NAME or NAME@V) with ``input`` (as run ``run_id``,
    default a new id): 404 unknown, 422 input refused or the stored definition unusable
    here, 503 while shutting down."""
    name, version = parse_reference(reference)
    try:
        checked = await rt.checked(name, version)
    except WorkflowNotFound as exc:
        raise not_found("workflow", reference, str(exc)) from exc
    except DefinitionError as exc:
        raise ApiError(422, "invalid_definition",
                       f"the stored definition of {reference} cannot run here",
                       [{"location": p.location, "message": p.message}
                        for p in exc.problems]) from exc
    try:
        return await rt.start(checked, input, version=version, run_id=run_id)
    except InputError as exc:
        raise ApiError(422, "invalid_input", str(exc), {"workflow": reference}) from exc
    except Closing as exc:
        raise ApiError(503, "unavailable", str(exc)) from exc


@router.post("", status_code=201, response_model=RunCreated, responses=_ERRORS)
async def create_run(body: RunCreate, rt: Runtime) -> RunCreated:
    """Start a run of a stored workflow; it executes in the server (or on the workers
    with PostgreSQL)."""
    run = await start_run(rt, body.workflow, body.input)
    return RunCreated(run_id=run.run_id, status=str(run.status))


# ------------------------------------------------------------------ pages


def encode_cursor(run: RunRecord) -> str:
    raw = json.dumps([run.created_at, run.run_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(text: str) -> tuple[float, str]:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        at, run_id = json.loads(raw)
        if isinstance(at, bool) or not isinstance(at, int | float) \
                or not isinstance(run_id, str):
            raise ValueError("not a cursor")
        if not (math.isfinite(at) and 0 <= at <= MAX_CURSOR_TIME):
            raise ValueError("not a time")
        return float(at), run_id
    except (ValueError, TypeError, OverflowError, binascii.Error,
            UnicodeDecodeError) as exc:
        raise ApiError(400, "invalid_cursor", f"invalid cursor {text!r}: pass the `next` "
                       f"value of a previous page as `before`", {"before": text}) from exc


async def runs_page(rt: ServerRuntime, workflow: str | None, status: RunStatus | None,
                    limit: int, before: str | None,
                    children: bool = False) -> tuple[list[RunRecord], str | None]:
    """One page, newest first, after the cursor ``before`` (the last run of the previous
    page): the store lists runs created at or before its time (ties in creation order),
    and those up to the cursor's run are skipped.  Top-level runs only, unless
    ``children``."""
    if before is None:
        rows = await rt.store.list_runs(RunFilter(workflow=workflow, status=status,
                                                  limit=limit + 1, top_level=not children))
    else:
        at, last = decode_cursor(before)
        fetch = limit + 17
        while True:
            rows = await rt.store.list_runs(RunFilter(workflow=workflow, status=status,
                                                      before=at, limit=fetch,
                                                      top_level=not children))
            index = next((i for i, r in enumerate(rows) if r.run_id == last), None)
            if index is not None:
                rows = rows[index + 1:]
                break
            if len(rows) < fetch or rows[-1].created_at < at:
                # the cursor's run no longer matches (its status changed): go on after
                # every run of its time
                rows = [r for r in rows if r.created_at < at]
                break
            fetch *= 2  # many runs created at the very same time: look further
    page = rows[:limit]
    cursor = encode_cursor(page[-1]) if len(rows) > limit and page else None
    return page, cursor


def summary_json(run: RunRecord) -> dict[str, Any]:
    """A run of a page: the fields of ``RunSummary``."""
    return {"run_id": run.run_id, "workflow": run.workflow, "version": run.version,
            "status": str(run.status), "created_at": iso(run.created_at),
            "started_at": iso(run.started_at), "finished_at": iso(run.finished_at),
            "duration_s": duration(run), "error": run.error, "retry_of": run.retry_of,
            "parent_run_id": run.parent_run_id}


@router.get("", response_model=RunPage, responses={400: {"model": ErrorBody}})
async def list_runs(rt: Runtime, workflow: str | None = None, status: str | None = None,
                    limit: Annotated[str | None, Query(description="1-500, default 50")]
                    = None, before: str | None = None,
                    children: Annotated[bool, Query(
                        description="child runs too (of `workflow` and `loop` steps); "
                                    "default: top-level runs only")] = False,
                    ) -> JSONResponse:
    """Runs, newest first; ``next`` is the cursor of the following page (pass it as
    ``before``), null on the last page."""
    if status is not None and status not in STATUSES:
        raise ApiError(400, "invalid_status", f"unknown run status {status!r}: one of "
                       f"{', '.join(STATUSES)}", {"status": status})
    count = DEFAULT_LIMIT
    limit, before = limit or None, before or None  # an empty value is no value
    if limit is not None:
        if not limit.isdigit() or not 1 <= int(limit) <= MAX_LIMIT:
            raise ApiError(400, "invalid_limit", f"limit must be an integer from 1 to "
                           f"{MAX_LIMIT}, not {limit!r}", {"limit": limit})
        count = int(limit)
    async with rt.reads:  # one list query at a time
        page, cursor = await runs_page(rt, workflow or None,
                                       RunStatus(status) if status else None, count, before,
                                       children)
    # the body as RunPage documents it, encoded once (a RunPage model would be built,
    # then validated and serialized again by FastAPI: most of a page's cost)
    return JSONResponse({"runs": [summary_json(r) for r in page], "next": cursor})


# ------------------------------------------------------------------ one run


async def get_run_or_404(rt: ServerRuntime, run_id: str) -> RunRecord:
    try:
        return await rt.store.get_run(run_id)
    except RunNotFound as exc:
        raise not_found("run", run_id) from exc


RUN_DOCUMENT = (
    "The run as `plait run --json` shows it, plus `attempts` (in start order), `input`, "
    "`logs`, the run's times, `child_run_id`/`child_run_ids` on the entries of "
    "`workflow` and `loop` steps, and `waiting` on every step entry: null, or while the "
    "step waits `{\"kind\", \"prompt\", \"show\", \"event\", \"until\", "
    "\"child_run_id\"}` (an approval's rendered prompt and the content under review); "
    "`llm` on every step entry (null, or the model request the step sent: `{\"model\", "
    "\"attempt\", \"messages\", \"cut\"}`) and `usage` (null, or its tokens "
    "`{\"prompt_tokens\", \"completion_tokens\", \"total_tokens\"}` with its child "
    "runs'), and on the run `usage` and `llm_tokens`: the tokens of the run and all its "
    "child runs, and `llm_budget`: null, or `{\"max_llm_tokens\", \"used\"}` for a run "
    "whose definition sets `limits.max_llm_tokens`; and `continuation`: null, or "
    "`{\"step\", \"error\", \"command\", \"decided_at\", \"failed_at\"}` while a "
    "recorded decision could not be applied (the run is stuck until `command`, "
    "`plait resume RUN_ID`, continues it).\n\n"
    f"A run of more than {STEPS_PER_PAGE:,} steps is read in pages: each page is that "
    f"document with the next {STEPS_PER_PAGE:,} step entries (the definition's order, "
    "map items by index), only their attempts and logs, and `steps_next`: the cursor of "
    f"the next page (pass it as `{CURSOR_PARAMETER}`), null on the last page. A run of "
    f"at most {STEPS_PER_PAGE:,} steps is one document without `steps_next`.")


@router.get("/{run_id}", description=RUN_DOCUMENT,
            responses={200: {"content": {"application/json": {"schema": {
                "type": "object"}}}}, 400: {"model": ErrorBody}, 404: {"model": ErrorBody}})
async def get_run(run_id: str, rt: Runtime,
                  steps_after: Annotated[str | None, Query(
                      description="the `steps_next` cursor of the previous page")] = None,
                  ) -> JSONResponse:
    """The run's document, or one page of it (see the description)."""
    after = parse_steps_after(steps_after)
    store = rt.store
    # the run, its steps, attempts, history and journal in one read (one statement on
    # PostgreSQL, one read transaction on SQLite): one snapshot, so the run's status is
    # never newer than its steps'.  A page is cut from them here.
    try:
        document = await rt.read(store.read_run(run_id))
    except RunNotFound as exc:
        raise not_found("run", run_id) from exc
    run, steps, events = document.run, document.steps, document.events
    workflow = document.workflow
    definition = None if workflow is None else workflow.definition
    value = run_page(run, steps, document.attempts, LogRecord.from_events(events), after)
    # a decision recorded that nobody could apply: why, and what continues the run
    value["continuation"] = continuation.stuck(run, steps, events, now=time.time())
    # as plait show --json: a workflow/loop step's entry names its child run(s)
    add_child_runs(value, await rt.read(child_runs(store, run, definition)))
    add_waiting(value, events)  # what a waiting step asks (prompt, show)
    add_journal(value, document.journal)  # its ctx.run calls
    # the messages each model call sent, and the tokens rolled up with the child runs'
    rolled = await rt.read(roll_up(store, run, events, [s.step_id for s in steps],
                                   definition))
    add_llm(value, events, rolled)
    # encoded once, as plain JSON: no response model to validate it against again
    return JSONResponse(value)


@router.post("/{run_id}/cancel", status_code=202, response_model=Accepted,
             responses={404: {"model": ErrorBody}, 409: {"model": ErrorBody}})
async def cancel_run(run_id: str, rt: Runtime) -> Accepted:
    """Ask for the run's cancellation (202); its executor stops it within about a
    second.  409 when it already completed or failed."""
    run = await get_run_or_404(rt, run_id)
    if run.status in FINAL_RUN_STATES and run.status is not RunStatus.CANCELLED:
        raise ApiError(409, "run_ended", f"run {run_id} already ended ({run.status}); "
                       f"there is nothing to cancel", {"status": str(run.status)})
    try:
        await rt.cancel(run)
    except Closing as exc:
        raise ApiError(503, "unavailable", str(exc)) from exc
    now = await rt.store.get_run(run_id)
    return Accepted(run_id=run_id, status=str(now.status),
                    cancel_requested=now.cancel_requested
                    or now.status is RunStatus.CANCELLED)


@router.post("/{run_id}/retry", status_code=201, response_model=RetryCreated,
             responses=_ERRORS)
async def retry_run(run_id: str, rt: Runtime, body: RetryBody | None = None) -> RetryCreated:
    """A new run reusing the completed outputs upstream of what failed (or of
    ``from``); with ``input``, that input instead of the old run's."""
    body = body or RetryBody()
    old = await get_run_or_404(rt, run_id)
    if body.from_ is not None:
        steps = {s.step_id for s in await rt.store.get_steps(run_id)}
        if body.from_ not in steps:
            raise not_found("step", body.from_, f"run {run_id} has no step {body.from_!r}")
    try:
        new = await rt.retry(old.run_id, body.from_, body.input, "input" in
                             body.model_fields_set)
    except InputError as exc:
        raise ApiError(422, "invalid_input", str(exc)) from exc
    except DefinitionError as exc:
        raise ApiError(422, "invalid_definition", str(exc)) from exc
    except RunError as exc:
        raise ApiError(409, "conflict", str(exc)) from exc
    except Closing as exc:
        raise ApiError(503, "unavailable", str(exc)) from exc
    return RetryCreated(run_id=new.run_id)


async def _stuck(rt: ServerRuntime, run_id: str) -> JSONDict | None:
    """The run's ``continuation`` entry (a decision nobody could apply), or None."""
    run = await rt.store.get_run(run_id)
    steps, events = await rt.store.get_steps(run_id), await rt.store.get_events(run_id)
    return continuation.stuck(run, steps, events, now=time.time())


@router.post("/{run_id}/steps/{step}/approve", response_model=Decision,
             responses={404: {"model": ErrorBody}, 409: {"model": ErrorBody}})
async def approve_step(run_id: str, step: str, rt: Runtime,
                       body: ApproveBody | None = None) -> Decision | JSONResponse:
    """Record a decision on a waiting approval step; the run continues.  The first
    decision stands: 409 when one is stored already, or the step is not waiting."""
    body = body or ApproveBody()
    await get_run_or_404(rt, run_id)
    steps = {s.step_id: s for s in await rt.store.get_steps(run_id)}
    if step not in steps:
        raise not_found("step", step, f"run {run_id} has no step {step!r}")
    try:
        await rt.approve(run_id, step, approved=body.approved, by=body.by or "api",
                         data=body.data)
    except DecisionTaken as exc:
        stuck = await _stuck(rt, run_id)
        message = str(exc) + ("" if stuck is None else "; " + continuation.stuck_text(stuck))
        raise ApiError(409, "already_decided", message,
                       {"decision": exc.decision, "continuation": stuck}) from exc
    except RunError as exc:
        raise ApiError(409, "not_waiting", str(exc),
                       {"status": str(steps[step].status)}) from exc
    return Decision(run_id=run_id, step=step,
                    decision="approved" if body.approved else "rejected")


@router.post("/{run_id}/signals/{name:path}", response_model=Signalled,
             responses={404: {"model": ErrorBody}, 409: {"model": ErrorBody},
                        422: {"model": ErrorBody}})
async def signal_run(run_id: str, name: str, rt: Runtime,
                     body: SignalBody | None = None) -> Signalled:
    """Send the event ``name`` (with ``data``) to a run, for its waits on that name;
    the run continues.  The first event of a name stands: 409 when one is stored
    already, or the run has ended; 422 for a bad name or data."""
    body = body or SignalBody()
    await get_run_or_404(rt, run_id)
    try:
        await rt.signal(run_id, name, body.data)
    except EventTaken as exc:
        raise ApiError(409, "already_sent", str(exc),
                       {"event": name, "sent_at": iso(exc.sent_at)}) from exc
    except RunFinished as exc:
        raise ApiError(409, "run_finished", str(exc), {"status": exc.status}) from exc
    except InputError as exc:
        raise ApiError(422, "invalid_event", str(exc)) from exc
    return Signalled(run_id=run_id, event=name)
