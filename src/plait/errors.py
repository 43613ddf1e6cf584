"""Every error plait raises, in one tree.

::

    PlaitError
    ├── DefinitionError          a workflow definition is invalid (carries every Problem)
    ├── InputError               a run's input is not JSON or fails the input schema
    ├── RunError                 a run cannot be started, resumed or changed as asked
    │   ├── RunNotFound
    │   ├── StepNotFound         the run has no such step (carries the closest ids)
    │   ├── StepNotWaiting       the step is not waiting for a decision (carries its status)
    │   ├── RunFinished          something was sent to a run that has ended
    │   ├── RunBusy              another live process executes the run
    │   └── RunTakenOver         the run's driver lost it to another (its lease ran out)
    ├── StoreError               a backend failed; driver errors are wrapped once, here
    │   ├── TransitionError      a state change the transition table does not allow
    │   ├── StaleWriteError      a write whose expected prior state no longer holds
    │   │   ├── DecisionTaken    an approval step already has its decision (carries it)
    │   │   └── EventTaken       the run already has an event of that name
    │   ├── VersionConflict      name@version already stored with another fingerprint
    │   ├── WorkflowNotFound
    │   ├── RunLeftUnfinished    the store failed mid-run: stored unfinished, resumable
    │   ├── StoreUnreachable     its server cannot be reached now (try again later)
    │   ├── UnstorableValue      a value it cannot hold (not JSON, not valid Unicode)
    │   └── SchemaVersionError   a database written by a newer plait
    └── StepError                why one attempt of a step failed (stored as its error)
        ├── FatalError           raised by user code: fail now, never retry
        │   ├── UntrustedRefused a definition breaks the rules for untrusted ones (carries them)
        │   └── TokenBudgetSpent a run's limits.max_llm_tokens is spent: the model call is not sent
        ├── DefinitionRejected   a definition written at run time is invalid (carries every Problem)
        ├── TemplateError        a template failed to render (never retried)
        ├── OutputError          a step returned something that is not JSON (never retried)
        ├── StepTimeout          the attempt ran past the step's timeout
        ├── CircuitOpenError     the step's circuit breaker is open
        ├── HTTPStatusError      an http step got a status it did not expect
        ├── InterruptedAttempt   the process running the attempt stopped (a failed attempt)
        ├── ProcessStepFailed    a call run with executor: process raised (carries its names)
        ├── ApprovalRequested    ctx.wait_for_approval parks the step (not a failure)
        ├── WaitRequested        ctx.wait_for_event / ctx.sleep park the step (not a failure)
        │   ├── EventRequested   the event is not there yet
        │   ├── SleepRequested   its time has not come
        │   └── ChildRequested   a workflow/loop step's child run (on a worker) has not ended
        ├── JournalNameReused    ctx.run used one call name twice in an attempt (never retried)
        └── NetworkRefused       the network policy refused a host or address (never retried)

Errors carry data (``DefinitionError.problems``, ``StepError.step``) so callers never
parse messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class PlaitError(Exception):
    """Base of every error plait raises on purpose."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """One thing wrong with a definition: where, what, and (when known) the fix."""

    location: str
    message: str
    hint: str | None = None

    def __str__(self) -> str:
        text = f"{self.location}: {self.message}" if self.location else self.message
        return f"{text} ({self.hint})" if self.hint else text


class DefinitionError(PlaitError):
    """A workflow definition is invalid; ``problems`` lists every problem found at once."""

    def __init__(self, problems: Sequence[Problem], *, source: str | None = None) -> None:
        self.problems = tuple(problems)
        self.source = source
        head = f"{source}: " if source else ""
        count = len(self.problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        noun = "problem" if count == 1 else "problems"
        super().__init__(f"{head}invalid workflow definition ({count} {noun}):\n{lines}")


class InputError(PlaitError):
    """The input given to a run is not acceptable."""


class RunError(PlaitError):
    """A run cannot be started, resumed or changed as asked."""


class RunTakenOver(RunError):
    """The process driving a run found, at its heartbeat, that another process took the
    run over (its lease on the run ran out): it stops driving the run, writing nothing."""


class RunNotFound(RunError):
    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(f"no run with id {run_id!r}")


class StepNotFound(RunError):
    """The run has no step ``step_id`` (``hint``: the closest step id, if any)."""

    def __init__(self, run_id: str, step_id: str, hint: str | None = None) -> None:
        self.run_id, self.step_id, self.hint = run_id, step_id, hint
        shown = f" ({hint})" if hint else ""
        super().__init__(f"run {run_id!r} has no step {step_id!r}{shown}")


class StepNotWaiting(RunError):
    """A decision was given for a step that does not wait for one: ``status`` is the
    step's, ``run_status`` the run's (a finished run has nothing to approve)."""

    def __init__(self, run_id: str, step_id: str, status: str, run_status: str) -> None:
        self.run_id, self.step_id = run_id, step_id
        self.status, self.run_status = status, run_status
        if run_status in ("completed", "failed", "cancelled"):
            message = f"run {run_id!r} is {run_status}; there is nothing to approve"
        else:
            message = (f"step {step_id!r} of run {run_id!r} is {status}, not waiting for "
                       f"approval")
        super().__init__(message)


class RunFinished(RunError):
    """Something was sent to a run that has ended (``status``): nothing is stored."""

    def __init__(self, run_id: str, status: str, what: str) -> None:
        self.run_id, self.status = run_id, status
        super().__init__(f"run {run_id!r} is {status}; {what} was not stored")


class RunBusy(RunError):
    """Another live process executes the run (``owner``: its "host:pid")."""

    def __init__(self, run_id: str, owner: str | None, message: str) -> None:
        self.run_id, self.owner = run_id, owner
        super().__init__(message)


class StoreError(PlaitError):
    """A store backend failed."""


class StoreUnreachable(StoreError):
    """The store's server cannot be reached now (refused, timed out, starting or
    shutting down, out of connections): trying again later may work, where a refused
    login, a missing database or a bad URL will not."""


class UnstorableValue(StoreError):
    """A write refused, storing nothing, because a value in it cannot be stored: not
    JSON (NaN, bytes, an object), or text that is not valid Unicode (a lone
    surrogate).  Writing the same values again fails the same way: the writer splits
    the write and fails (or cleans) what the store refused (``runtime.unstorable``)."""


class TransitionError(StoreError):
    def __init__(self, what: str, source: str, target: str) -> None:
        self.what, self.source, self.target = what, source, target
        super().__init__(f"{what}: transition {source} -> {target} is not allowed")


class StaleWriteError(StoreError):
    """A write expected a prior state that no longer holds (another writer got there)."""


class DecisionTaken(StaleWriteError):
    """An approval step already has a stored decision: the first one stands (docs/operations.md).
    ``decision`` is the standing one ({"decision": "approved"|"rejected", "by", "at",
    "data"})."""

    def __init__(self, run_id: str, step_id: str, decision: dict[str, object]) -> None:
        self.run_id, self.step_id, self.decision = run_id, step_id, decision
        verb = decision.get("decision", "decided")
        by = decision.get("by", "unknown")
        super().__init__(f"step {step_id!r} of run {run_id!r} was already {verb} by {by}; "
                         f"the first decision stands and this one was not recorded")


class EventTaken(StaleWriteError):
    """The run already has an event of that name: the first one sent stands
    (docs/waiting.md).  ``sent_at`` is when the standing one was stored (epoch s)."""

    def __init__(self, run_id: str, name: str, sent_at: float) -> None:
        self.run_id, self.name, self.sent_at = run_id, name, sent_at
        super().__init__(f"run {run_id!r} already has an event {name!r}; the first one "
                         f"sent stands and this one was not stored")


class VersionConflict(StoreError):
    def __init__(self, name: str, version: int, stored: str, given: str) -> None:
        self.name, self.version, self.stored, self.given = name, version, stored, given
        super().__init__(
            f"workflow {name!r} version {version} is stored with fingerprint {stored}, "
            f"but this definition has fingerprint {given}; a stored version never "
            f"changes: remove `version:` to store it as the next version, or bump it"
        )


class WorkflowNotFound(StoreError):
    """No stored workflow ``name`` (``versions`` empty), or no ``version`` of it
    (``versions``: the ones that are stored)."""

    def __init__(self, name: str, version: int | None = None,
                 versions: Sequence[int] = ()) -> None:
        self.name, self.version, self.versions = name, version, tuple(versions)
        if version is not None and self.versions:
            stored = ", ".join(str(v) for v in self.versions)
            noun = "version" if len(self.versions) == 1 else "versions"
            message = f"workflow {name!r} has {noun} {stored}; no version {version}"
        else:
            what = f"{name}@{version}" if version is not None else name
            message = f"no stored workflow {what!r}"
        super().__init__(message)


class RunLeftUnfinished(StoreError):
    """The store failed while the run executed, so it stopped: the run is stored as far
    as it got, and nobody holds it.  ``plait resume RUN_ID`` (or any worker) continues
    it; completed steps are not re-run.  ``error`` is the store's error."""

    def __init__(self, run_id: str, error: StoreError) -> None:
        self.run_id, self.error = run_id, error
        super().__init__(f"run {run_id!r} stopped because the store failed: {error}; it "
                         f"is stored unfinished and nobody holds it: `plait resume "
                         f"{run_id}` continues it")


class SchemaVersionError(StoreError):
    """The database was written by a newer plait than this one."""


class StepError(PlaitError):
    """Why an attempt of a step failed.  ``retryable`` False means: never retry."""

    retryable: bool = True

    def __init__(self, message: str, *, step: str | None = None) -> None:
        self.step = step
        super().__init__(message)


class ApprovalRequested(StepError):
    """Raised by ``ctx.wait_for_approval`` when no decision is stored yet: the attempt
    ends, the step waits for a person (never a failure, never retried).  Let it
    propagate: a step that catches it and returns goes on as if nobody was asked."""

    retryable = False

    def __init__(self, step: str, prompt: str | None) -> None:
        self.prompt = prompt
        shown = f": {prompt}" if prompt else ""
        super().__init__(f"step {step!r} waits for approval{shown}", step=step)


class WaitRequested(StepError):
    """Raised by ``ctx.wait_for_event`` / ``ctx.sleep`` when the step must wait (the
    event is not there, the time has not come): the attempt ends, the step waits and
    runs again from the start once it may go on (never a failure, never retried).  Let
    it propagate.  ``until``: the epoch second it waits until, if any."""

    retryable = False

    def __init__(self, message: str, *, step: str, until: float | None) -> None:
        self.until = until
        super().__init__(message, step=step)


class EventRequested(WaitRequested):
    """``ctx.wait_for_event``: no event ``name`` is there yet."""

    def __init__(self, step: str, name: str, until: float | None) -> None:
        self.name = name
        super().__init__(f"step {step!r} waits for event {name!r}", step=step, until=until)


class SleepRequested(WaitRequested):
    """``ctx.sleep``: its time has not come."""

    def __init__(self, step: str, name: str, until: float) -> None:
        self.name = name
        super().__init__(f"step {step!r} sleeps ({name!r})", step=step, until=until)


class ChildRequested(WaitRequested):
    """A ``workflow`` or ``loop`` step on a worker: its child run ``child_run_id`` has
    not ended; the step waits for its end holding no slot."""

    def __init__(self, step: str, child_run_id: str) -> None:
        self.child_run_id = child_run_id
        super().__init__(f"step {step!r} waits for child run {child_run_id}", step=step,
                         until=None)


class FatalError(StepError):
    """Raise from a step to fail it at once, without retries (the fallback still runs)."""

    retryable = False


class TokenBudgetSpent(FatalError):
    """A model call (an ``llm`` step's attempt, a ``ctx.llm`` call) refused before it
    was sent: a run's ``limits.max_llm_tokens`` is spent (``used`` >= ``limit``).
    ``budget_run`` is the run whose budget it is: the calling run itself, or a run that
    started it (a budget covers the child runs, at any depth).  Never retried."""

    def __init__(self, limit: int, used: int, *, step: str, budget_run: str,
                 own: bool = True) -> None:
        self.limit, self.used, self.budget_run = limit, used, budget_run
        whose = "" if own else f" (by run {budget_run} and the runs it started)"
        super().__init__(f"token budget of {limit} spent: {used} used{whose}", step=step)


class UntrustedRefused(FatalError):
    """The server refused to run a step of a definition that breaks the rules for
    untrusted definitions (``plait.core.trust``), however it was stored: ``problems``
    lists each refusal with its location.  Never retried."""

    def __init__(self, problems: Sequence[Problem], *, step: str) -> None:
        self.problems = tuple(problems)
        listed = "; ".join(str(p) for p in self.problems)
        where = f"step {step!r}: " if step else ""
        super().__init__(f"{where}refused: the definition breaks the rules for "
                         f"definitions registered over the API: {listed}",
                         step=step or None)


class DefinitionRejected(StepError):
    """The definition a ``workflow`` step wrote at run time (a template's value, a
    function's result) is invalid or breaks the step's rules: ``problems`` lists every
    one.  A failed attempt like any other: retries and fallbacks apply."""

    def __init__(self, problems: Sequence[Problem], *, step: str) -> None:
        self.problems = tuple(problems)
        count = len(self.problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        noun = "problem" if count == 1 else "problems"
        super().__init__(f"step {step!r}: the definition written at run time is invalid "
                         f"({count} {noun}):\n{lines}", step=step)


class TemplateError(StepError):
    """A template failed to render: names the step, the field and the template."""

    retryable = False

    def __init__(self, message: str, *, step: str | None = None, field: str | None = None,
                 template: str | None = None) -> None:
        self.field, self.template = field, template
        parts = [f"step {step!r}" if step else None, f"field {field!r}" if field else None]
        where = ", ".join(p for p in parts if p)
        shown = f" in template {template!r}" if template is not None else ""
        super().__init__(f"{where + ': ' if where else ''}{message}{shown}", step=step)


class OutputError(StepError):
    """A step's output is not JSON; ``path`` is the key path of the offending value."""

    retryable = False

    def __init__(self, message: str, *, step: str | None = None, path: str = "") -> None:
        self.path = path
        super().__init__(message, step=step)


class StepTimeout(StepError):
    def __init__(self, seconds: float, *, step: str | None = None) -> None:
        self.seconds = seconds
        super().__init__(f"attempt timed out after {seconds:g}s", step=step)


class CircuitOpenError(StepError):
    retryable = False

    def __init__(self, key: str, *, step: str | None = None) -> None:
        self.key = key
        super().__init__(f"circuit breaker {key!r} is open", step=step)


class HTTPStatusError(StepError):
    def __init__(self, status: int, url: str, *, retryable: bool, step: str | None = None,
                 retry_after: float | None = None, body: str = "") -> None:
        self.status, self.url, self.retry_after = status, url, retry_after
        self.retryable = retryable
        snippet = f": {body[:200]}" if body else ""
        super().__init__(f"HTTP {status} from {url}{snippet}", step=step)


class InterruptedAttempt(StepError):
    """An attempt that was running when the process executing it stopped driving the
    run, its outcome never stored: it counts as a failed attempt and retries under the
    step's policy."""

    def __init__(self, worker: str | None, *, step: str, taken_over: bool = False) -> None:
        self.worker = worker
        # taken_over: found by a worker that took the run over from its driver (the
        # attempt ran in the driver's process, and its lease on the run ran out)
        # the process may be alive: a store that refused its write stops its run too,
        # so the message says what is known, that the outcome was never stored
        if taken_over:
            why = (f"attempt interrupted: the process running it ({worker or '?'}) "
                   f"stopped heartbeating for longer than its lease on the run, and "
                   f"another worker took the run over (the process was killed, paused, "
                   f"or a step held the GIL: see executor: process); the attempt's "
                   f"outcome was never stored")
        else:
            why = (f"attempt interrupted: the process running it ({worker or '?'}) "
                   f"never stored its outcome (it stopped, or the store refused its "
                   f"write)")
        super().__init__(why, step=step)


class ProcessStepFailed(StepError):
    """A python step's call raised in its child process (``executor: process``):
    ``names`` are the class names of the child's exception, most derived first (what
    ``retry_on`` rules match), the message is its message, ``child_traceback`` its
    traceback as text."""

    def __init__(self, names: tuple[str, ...], message: str, *, retryable: bool = True,
                 retry_after: float | None = None,
                 child_traceback: str | None = None) -> None:
        self.names = names
        self.retryable = retryable
        self.retry_after = retry_after
        self.child_traceback = child_traceback
        super().__init__(message)


class JournalNameReused(StepError):
    """``ctx.run`` was given a call name the attempt used already: each journaled call
    of a step needs a name of its own (``name`` carries it).  Never retried: every
    attempt runs the same code."""

    retryable = False

    def __init__(self, name: str, *, step: str) -> None:
        self.name = name
        super().__init__(f"step {step!r}: the journaled call name {name!r} was used twice "
                         f"in one attempt; give each ctx.run call a name of its own",
                         step=step)


class NetworkRefused(StepError):
    """The network policy refused a connection before it was made (never retried).
    ``host`` as the URL gives it, ``address`` the resolved address refused (None when
    the name itself was), ``rule`` the network or name rule that refused it."""

    retryable = False

    def __init__(self, message: str, *, step: str | None = None, host: str | None,
                 address: str | None, rule: str) -> None:
        self.host, self.address, self.rule = host, address, rule
        super().__init__(message, step=step)
