"""What an attempt reads of its run, and what its ticket carries of it.

A ticket does not copy its ancestors' outputs: on a chain of n steps that is O(n^2)
bytes, and one early output of 1 MB would make every later ticket 1 MB.  The driver
puts in a ticket only what is small and certainly read: the outputs of the step's
parents (``ctx.outputs``) under ``INLINE_BYTES``, and the run's input under the same
bound.  The worker works out what the step reads (``step_reads``): its parents, the
steps its templates name (``steps.X``), and for a Python step the steps its
function's parameters are named after.  What the ticket did not carry it reads from
the store once (``Store.get_steps_by_id``) and keeps with the run's view: a step's
row, once final, never changes.  A template that reads ``steps`` some other way (a
computed key, a loop) may read any ancestor: then all of them are read.
"""

from __future__ import annotations

from ..core.model import JSON, StepSpec
from ..core.templates import TemplateSyntaxError, compile_template
from ..core.validate import CheckedWorkflow, step_templates
from ..steps.binding import signature_of, step_function

# a parent's output (or the run's input) up to this many bytes of JSON travels in the
# ticket; a larger one is read from the store by the worker, once per run
INLINE_BYTES = 2048


def is_small(value: JSON, limit: int = INLINE_BYTES) -> bool:
    """Whether ``value`` is at most about ``limit`` bytes as JSON, found without encoding
    it and in time bounded by ``limit`` (a walk that stops once past it)."""
    budget = limit
    todo: list[object] = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, str):
            budget -= len(item) + 2
        elif isinstance(item, dict):
            budget -= 2 + 4 * len(item)
            for key, val in item.items():
                budget -= len(key) if isinstance(key, str) else 8
                todo.append(val)
        elif isinstance(item, list | tuple):
            budget -= 2 + len(item)
            todo.extend(item)
        else:
            budget -= 8  # a number, true, false, null
        if budget < 0:
            return False
    return True


def _ancestors(checked: CheckedWorkflow) -> list[tuple[int, ...] | None]:
    return checked.derive("ancestors", lambda: [None] * checked.graph.size)


def ancestors_of(checked: CheckedWorkflow, i: int) -> tuple[int, ...]:
    """The steps whose outputs step ``i`` may read: its ancestors (templates may read
    only those; validation refuses others), kept per checked workflow."""
    cache = _ancestors(checked)
    found = cache[i]
    if found is None:
        parents = checked.graph.parents
        seen: set[int] = set()
        todo = list(parents[i])
        while todo:
            p = todo.pop()
            if p not in seen:
                seen.add(p)
                todo.extend(parents[p])
        found = cache[i] = tuple(sorted(seen))
    return found


def _names(step: StepSpec) -> tuple[set[str], bool]:
    """The step ids ``step``'s templates name, and whether one reads ``steps`` in a way
    that names no step."""
    names: set[str] = set()
    dynamic = False
    for _field, text in step_templates(step):
        try:
            compiled = compile_template(text)
        except TemplateSyntaxError:
            continue  # refused when the workflow was checked; it never renders
        names |= compiled.steps_read
        dynamic = dynamic or compiled.steps_dynamic
    return names, dynamic


def _parameter_names(step: StepSpec) -> set[str] | None:
    """The parameter names of the function a Python step calls, as the attempt imports
    it; None when a fallback names a function by ``module:function``: that one is
    imported only when it runs (under the rules for untrusted definitions), so what it
    reads is not known here."""
    fallback = step.fallback
    if fallback is not None and fallback.func is None and fallback.call is not None:
        return None
    found: set[str] = set()
    for fn in (step_function(step), fallback.func if fallback is not None else None):
        if fn is not None:
            found.update(name for name, _default in signature_of(fn).params)
    return found


def step_reads(checked: CheckedWorkflow, at: int) -> tuple[int, ...]:
    """The steps (graph indices, ancestors of ``at``) whose rows an attempt of step
    ``at`` (or of one of its map's items) may read, worked out once per checked
    workflow.  ImportError when a Python step's function cannot be imported here."""
    cache: dict[int, tuple[int, ...]] = checked.derive("step_reads", dict)
    found = cache.get(at)
    if found is None:
        found = cache[at] = _reads(checked, at)
    return found


def _reads(checked: CheckedWorkflow, at: int) -> tuple[int, ...]:
    ancestors = ancestors_of(checked, at)
    step = checked.spec.steps[at]
    names: set[str] = set()
    for part in (step, step.item) if step.item is not None else (step,):
        found, dynamic = _names(part)
        parameters = _parameter_names(part)
        if dynamic or parameters is None:
            return ancestors
        names |= found | parameters
    index = checked.graph.index
    wanted = {index[name] for name in names if name in index}
    wanted.update(checked.graph.parents[at])
    return tuple(p for p in ancestors if p in wanted)
