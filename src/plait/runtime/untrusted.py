"""The rules for untrusted definitions applied again by an engine that carries a
``TrustPolicy`` (``Services.trust``: the server's engine, its worker and the child
runs they start), before any step of a run starts: a definition that reached the
store by another path than the API (``plait run`` on a shared database) is refused
there too.  The rules are the core's (``plait.core.trust``); this module remembers
their verdict per checked workflow."""

from __future__ import annotations

from ..core.trust import TrustPolicy, untrusted_problems
from ..core.validate import CheckedWorkflow
from ..errors import Problem, UntrustedRefused


def problems_of(checked: CheckedWorkflow, policy: TrustPolicy) -> tuple[Problem, ...]:
    """What the rules refuse in ``checked`` (its stored form: every place at any
    depth), worked out once per checked workflow and policy."""
    return checked.derive(f"untrusted:{policy!r}", lambda: tuple(
        untrusted_problems(checked.definition, policy)))


def refused(checked: CheckedWorkflow, policy: TrustPolicy | None) -> bool:
    """Whether ``policy`` (None: a trusted engine) refuses to run ``checked``."""
    return policy is not None and bool(problems_of(checked, policy))


def refusal(checked: CheckedWorkflow, policy: TrustPolicy | None,
            step: str) -> UntrustedRefused | None:
    """The error failing an attempt of ``step`` (of a map's item too) of a refused
    definition, listing every problem; None when it may run."""
    if policy is None:
        return None
    problems = problems_of(checked, policy)
    if not problems:
        return None
    return UntrustedRefused(problems, step=step)
