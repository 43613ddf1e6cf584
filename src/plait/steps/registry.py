"""The registry of step types.

A step type is data: its name, the fields it accepts (checked before anything runs) and
an async function that executes one attempt.  Users add types with
``plait.register_step_type`` or an entry point in the group ``plait.step_types`` whose
object is a StepType.
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from ..core import expressions
from ..core.model import JSON, Limits, StepSpec
from ..core.steptypes import (
    FieldChecker,
    StepTypeInfo,
    register_type_info,
    register_unavailable_type,
    unavailable_reason,
)
from ..core.trust import TrustPolicy, capped
from ..errors import PlaitError, TemplateError
from . import netpolicy, offloop
from .context import StepContext, StepLog

if TYPE_CHECKING:
    from ..core.validate import CheckedWorkflow
    from ..store.base import Store


@dataclass(slots=True, kw_only=True)
class Services:
    """What the runtime lends to step types (owned by the engine)."""

    executor: Executor
    # where steps that talk HTTP may connect (http, llm): see steps.netpolicy
    http_policy: netpolicy.NetworkPolicy = netpolicy.DEFAULT
    # the engine's store: where steps with `cache:` keep results (runtime.stepcache)
    store: Store | None = None
    # child runs of `workflow` and `loop` steps (runtime.children.ChildRuns), set by
    # the engine that runs the attempt
    children: object | None = None
    # what ctx.llm does (steps.llmcall.ModelCalls), set by the engine: the step context
    # cannot import the llm step type, which imports it
    model_calls: object | None = None
    # the rules every definition this engine runs must follow (the server's: see
    # core.trust); None: definitions are trusted (plait run, the Python API)
    trust: TrustPolicy | None = None

    def limits(self, limits: Limits) -> Limits:
        """A definition's ``limits`` as this engine applies them: within the caps of
        ``trust``."""
        return capped(limits, self.trust.caps if self.trust is not None else None)


class RunAccess(Protocol):
    """What a step attempt may read of its run (``runtime.runview.RunView``)."""

    run_id: str
    checked: CheckedWorkflow  # the definition the run executes
    input: JSON
    shared_state: Mapping[str, JSON]  # the declared output keys written so far
    services: Services
    step_log: StepLog  # log records of ctx.logger, stored with the loop's next batch

    def template_context(self, index: int) -> Mapping[str, object]: ...

    def parent_outputs(self, index: int) -> Mapping[str, JSON]: ...

    def step_output(self, index: int) -> JSON: ...

    def step_error(self, index: int) -> str | None: ...  # what a fallback is given

    def resolve(self, call: StepCall, name: str) -> tuple[bool, object]: ...


_T = TypeVar("_T")


@dataclass(slots=True)
class StepCall:
    """One attempt of one step, as a step type sees it.

    Built once per attempt, so it holds only what differs between attempts; what is the
    same for the whole run is read through ``run``."""

    step: StepSpec
    index: int
    attempt: int
    started_at: float  # when the step's first attempt started (durable delays count from it)
    run: RunAccess
    # set while ``rendered`` runs its preparation in a worker thread: the names that
    # thread reads (taken on the event loop)
    _names: Mapping[str, object] | None = None
    # the attempt's one stop flag: set when it is cancelled or times out; a render in
    # a thread stops at its next check, and the step's code reads it as ctx.cancelled
    _stop: expressions.Stop | None = None

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def input(self) -> JSON:
        return self.run.input

    @property
    def state(self) -> Mapping[str, JSON]:
        return self.run.shared_state

    @property
    def services(self) -> Services:
        return self.run.services

    def template_context(self) -> Mapping[str, object]:
        return self.run.template_context(self.index)

    def parent_outputs(self) -> Mapping[str, JSON]:
        """The parents' outputs by id, read when asked (a parent that did not complete
        reads as None)."""
        return self.run.parent_outputs(self.index)

    def resolve(self, name: str) -> tuple[bool, object]:
        """A parameter name's value: input, ctx, a step id, an output key, an input key."""
        return self.run.resolve(self, name)

    def render(self, value: JSON, field_name: str) -> JSON:
        """Render a field's templates; TemplateError names the step, field and template
        (and, past a bound, which one: time 2 s or size 1 MiB)."""
        names = self._names if self._names is not None else self.template_context()
        try:
            return expressions.render_value(value, names, stop=self._stop)
        except expressions.RenderError as exc:
            path = getattr(exc, "path", "")
            text = _template_at(value, path)
            raise TemplateError(str(exc), step=self.step.id, field=f"{field_name}{path}",
                                template=text) from exc

    async def rendered(self, prepare: Callable[[StepCall], _T],
                       fields: JSON | None = None) -> _T:
        """``prepare(self)``, which renders this step's fields with ``render``.

        Cheap templates (``expressions.is_cheap``) render here on the event loop.  Any
        other may take up to its time bound, so ``prepare`` runs in a worker thread while
        the loop goes on committing, heartbeating and cancelling; cancelling this
        coroutine stops the render at the sandbox's next check.  ``fields``: the
        templates ``prepare`` renders, when not the step's own fields."""
        if expressions.is_cheap(self.step.config if fields is None else fields):
            return prepare(self)
        self._names = offloop.snapshot(self.template_context())
        if self._stop is None:
            self._stop = expressions.Stop()
        return await offloop.in_thread(self._stop, prepare, self)

    def context(self) -> StepContext:
        """The attempt's StepContext (O(1): its outputs and logger are read lazily)."""
        stop = self._stop
        if stop is None:
            stop = self._stop = expressions.Stop()
        run = self.run
        return StepContext(run_id=run.run_id, step_id=self.step.id, attempt=self.attempt,
                           input=run.input, state=run.shared_state,
                           outputs=run.parent_outputs(self.index), journal=run.step_log,
                           cancel_flag=stop, call=self)

    def stop(self) -> None:
        """The attempt was cancelled or timed out: its context says so (a sync body in
        a thread cannot be interrupted, but it can look)."""
        if self._stop is not None:
            self._stop.requested = True


def _template_at(value: JSON, path: str) -> str | None:
    """The template string at a render error's key path (for the message)."""
    node: JSON = value
    for part in path.replace("[", ".[").split("."):
        if not part:
            continue
        if part.startswith("[") and isinstance(node, list):
            node = node[int(part[1:-1])]
        elif isinstance(node, dict):
            node = node.get(part)
    return node if isinstance(node, str) else None


StepFunction = Callable[[StepCall], Awaitable[JSON]]


@dataclass(frozen=True, slots=True, kw_only=True)
class StepType:
    name: str
    run: StepFunction
    fields: frozenset[str]
    required: frozenset[str] = frozenset()
    check: FieldChecker | None = None
    literal_fields: frozenset[str] = frozenset()
    template_strings: frozenset[str] = frozenset()  # (see core.steptypes)
    # a cheap synchronous form, run on the loop without a task (transform, condition)
    inline: Callable[[StepCall], JSON] | None = None
    # the step waits for something outside the run (a person): the loop parks it in
    # `waiting` without a task, and the run waits (approval)
    parks: bool = False
    # traits the core knows too (``core.steptypes.StepTypeInfo`` says what each means)
    branches: bool = False
    expands: bool = False
    imports_call: bool = False
    child_runs: Callable[[Mapping[str, JSON]], int] | None = None
    only_waits: bool = False
    # optional, asked once per checked workflow for each step of this type: the step's
    # attempt function, doing what ``run`` does with what is the same for every attempt
    # worked out once (a python step's parameter plan); None: every attempt calls ``run``
    prepare: Callable[[StepSpec, CheckedWorkflow], StepFunction] | None = None


ENTRY_POINT_GROUP = "plait.step_types"
_REGISTRY: dict[str, StepType] = {}
_plugins_loaded = False
_log = logging.getLogger("plait.plugins")


def register_step_type(step_type: StepType) -> None:
    """Make a step type available to every definition loaded afterwards."""
    _REGISTRY[step_type.name] = step_type
    register_type_info(StepTypeInfo(
        name=step_type.name, fields=step_type.fields, required=step_type.required,
        check=step_type.check, literal_fields=step_type.literal_fields,
        template_strings=step_type.template_strings, branches=step_type.branches,
        expands=step_type.expands,
        imports_call=step_type.imports_call, child_runs=step_type.child_runs,
        only_waits=step_type.only_waits))


def get_step_type(name: str) -> StepType:
    load_plugins()
    try:
        return _REGISTRY[name]
    except KeyError:
        reason = unavailable_reason(name)
        raise PlaitError(f"unknown step type {name!r}"
                         + (f": {reason}" if reason else "")) from None


def load_plugins() -> None:
    """Register the types advertised by installed packages (entry point group
    ``plait.step_types``), once per process, before the first definition is loaded.

    An entry point's object is a StepType, or a function that registers types when
    called.  One that fails to load is noted (``unavailable_reason``) and logged; it
    stops only the definitions that use its type, which name it and the exception."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            _load_entry_point(ep)
        except Exception as exc:  # noqa: BLE001 - a plugin's import runs third-party code
            reason = (f"entry point {ep.name!r} ({ep.value}) of group {ENTRY_POINT_GROUP!r} "
                      f"failed to load: {type(exc).__name__}: {exc}")
            register_unavailable_type(ep.name, reason)
            _log.warning("%s", reason)


def _load_entry_point(ep: importlib.metadata.EntryPoint) -> None:
    obj = ep.load()
    if isinstance(obj, StepType):
        register_step_type(obj)
    elif callable(obj):
        obj()
    else:
        raise TypeError(f"expected a StepType or a function that registers step types, "
                        f"got {type(obj).__name__}")
