"""``concurrency_key`` and ``max_runs_per_key`` (docs/schedules.md): their checks, and the key of a
run rendered from its input.

A run's key is decided when the run is created, before any step ran, so the template
may read ``input`` only.  It is rendered in the sandbox like every template (docs/expressions.md).
Holding runs back while ``max_runs_per_key`` runs of their key are running is the
workers' business (a run waits ``pending``); this module only says what the key is.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import Problem
from . import expressions
from .expressions import RenderError
from .model import JSON, WorkflowSpec
from .serialize import canonical_json

MAX_KEY_LENGTH = 256  # characters of a rendered key (it is stored and compared)
DEFAULT_RUNS_PER_KEY = 1  # a key without max_runs_per_key: one run of it at a time
_READABLE = frozenset({"input"})


def runs_per_key(spec: WorkflowSpec) -> int | None:
    """How many runs of one key may run at once (None: the workflow has no key)."""
    if spec.concurrency_key is None:
        return None
    return spec.max_runs_per_key or DEFAULT_RUNS_PER_KEY


def key_problems(spec: WorkflowSpec, prior: Sequence[Problem] = ()) -> list[Problem]:
    """What is wrong with the two fields (a field that already has a problem in
    ``prior``, from loading, is not judged again)."""
    reported = {p.location for p in prior}
    problems: list[Problem] = []
    key, limit = spec.concurrency_key, spec.max_runs_per_key
    if key is not None and "concurrency_key" not in reported:
        problems += _template_problems(key)
    if limit is not None and "max_runs_per_key" not in reported:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            problems.append(Problem(location="max_runs_per_key", message=(
                f"expected a whole number of at least 1, got {limit!r}")))
        elif key is None:
            problems.append(Problem(
                location="max_runs_per_key",
                message="max_runs_per_key bounds the runs of one concurrency_key, and "
                "this workflow has none",
                hint='add concurrency_key: "{{ input.customer }}" (or the input field '
                "that names the key), or remove max_runs_per_key"))
    return problems


def _template_problems(key: object) -> list[Problem]:
    where = "concurrency_key"
    if not isinstance(key, str) or not key.strip():
        return [Problem(location=where, message=(
            f"expected a template over the input, like \"{{{{ input.customer }}}}\", "
            f"got {key!r}"))]
    if not expressions.is_template(key):
        return []  # one fixed key: every run of the workflow shares it
    problem = expressions.syntax_problem(key)
    if problem is not None:
        return [Problem(location=where, message=problem.describe())]
    others = sorted(expressions.names_read(key) - _READABLE)
    if others:
        names = ", ".join(repr(n) for n in others)
        return [Problem(location=where, message=(
            f"the template reads {names}; a concurrency key may read only `input`"),
            hint="the key is decided when the run is created, before any step ran")]
    return []


def run_key(spec: WorkflowSpec, input: JSON) -> tuple[str | None, int | None]:
    """(key, runs per key) of a new run of ``spec`` with ``input``; (None, None) when
    the workflow has no key.  RenderError as ``render_key``."""
    if spec.concurrency_key is None:
        return None, None
    return render_key(spec.concurrency_key, input), runs_per_key(spec)


def render_key(template: str, input: JSON) -> str:
    """The key of a run with ``input``.  A string renders as itself; a number or a
    boolean as its JSON text; a list or mapping as canonical JSON.  RenderError when the
    template fails (an input field that is missing, the sandbox's bounds), renders
    null, or is longer than MAX_KEY_LENGTH."""
    value = expressions.render_value(template, {"input": input})
    if value is None:
        raise RenderError(f"concurrency_key {template!r} rendered null for this input")
    text = value if isinstance(value, str) else canonical_json(value)
    if len(text) > MAX_KEY_LENGTH:
        raise RenderError(f"concurrency_key {template!r} rendered {len(text):,} "
                          f"characters, over {MAX_KEY_LENGTH}")
    return text
