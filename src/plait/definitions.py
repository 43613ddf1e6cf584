"""A definition as data (a dict from YAML or JSON, or the one stored with a run) made
into a CheckedWorkflow.

Used by ``Workflow.from_dict`` and by the engine, which validates a stored definition
again to resume or fork one of its runs.  It lives apart from ``plait.workflow`` so the
engine needs nothing of the Python API, which imports the engine to run workflows:
imports point one way (``workflow -> runtime.engine -> definitions``).
"""

from __future__ import annotations

from .core.loader import parse_definition
from .core.model import WorkflowSpec
from .core.source import check_data
from .core.validate import CheckedWorkflow, check
from .errors import DefinitionError, Problem
from .runtime.gctune import gc_paused
from .runtime.retry_names import retry_name_problems
from .steps.builtin import register_builtins
from .steps.child_files import include_child_files
from .steps.registry import load_plugins

# the built-in step types are known wherever a definition is checked: the Python API,
# and an engine resuming a stored run in a process that never imported it
register_builtins()


def check_definition(data: object, *, source: str | None = None,
                     check_imports: bool = False) -> CheckedWorkflow:
    """Parse and validate a definition dict; raise DefinitionError listing every
    problem.  With ``check_imports`` the python steps' functions are imported and the
    exception names of their retry policies checked (what running does first)."""
    load_plugins()
    check_data(data, source=source)  # JSON first: nothing below meets a bad value
    data, included = include_child_files(  # `workflow: ./child.yaml`
        data, source, lambda d, s: check_definition(d, source=s))
    with gc_paused(keep=True):  # one pause for building and checking a large graph
        spec, problems = parse_definition(data)
        problems = included + problems
        if spec is None:
            raise DefinitionError(problems, source=source)
        problems += alert_problems(spec)
        if check_imports:
            problems += _import_problems(spec)
        return check(spec, source=source, prior=problems)


def alert_problems(spec: WorkflowSpec) -> list[Problem]:
    """The problems of the definition's ``alerts:`` rules (``plait.observe.alerts``)
    and ``notify:`` targets (``plait.observe.notify``), each module imported only for a
    definition that has some."""
    found: list[Problem] = []
    if spec.notify is not None:
        from .observe.notify_targets import check_targets

        found += check_targets(spec.notify)
    if not spec.alerts:
        return found
    from .observe.alerts import check_rules

    return found + check_rules(spec.alerts)


def _import_problems(spec: WorkflowSpec) -> list[Problem]:
    from .runtime.preflight import import_problems

    return import_problems(spec) + retry_name_problems(spec)
