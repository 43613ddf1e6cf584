"""The commands that inspect definitions: ``validate``, ``plan`` and ``graph``, and how
every command exits."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Sequence
from typing import NoReturn

from ..core.validate import CheckedWorkflow
from ..errors import DefinitionError, StoreError
from ..runtime.preflight import preflight
from . import output
from .loading import load_file, load_target, stored_reference
from .settings import ExitCode

_IDLE_THREAD_GRACE_S = 0.5


def validate_files(files: Sequence[str], *, check_imports: bool) -> ExitCode:
    """Validate each file; ``valid`` lines on stdout, every problem on stderr."""
    out, err = output.console(), output.console(stderr=True)
    code = ExitCode.OK
    for file in files:
        try:
            checked = _checked(file, check_imports=check_imports)
        except DefinitionError as exc:
            err.print(output.problems_text(exc, file), end="")
            code = ExitCode.FAILED
        else:
            out.print(output.valid_text(file, checked), end="")
    return code


def _checked(file: str, *, check_imports: bool) -> CheckedWorkflow:
    # imports are checked with everything else, so every problem is listed at once
    checked = load_file(file, check_imports=check_imports).validate()
    if check_imports:
        try:
            preflight(checked)
        except DefinitionError as exc:
            raise DefinitionError(exc.problems, source=file) from exc
    return checked


def show_plan(file: str, *, as_json: bool) -> ExitCode:
    try:
        wf = load_file(file)
        plan = wf.plan()
    except DefinitionError as exc:
        output.console(stderr=True).print(output.problems_text(exc, file), end="")
        return ExitCode.USAGE
    if as_json:
        output.print_json({"workflow": wf.name, **plan.to_json()}, sys.stdout)
    else:
        output.console().print(output.plan_text(wf.name, plan), end="")
    return ExitCode.OK


async def show_graph(target: str, *, fmt: str, db: str) -> ExitCode:
    err = output.console(stderr=True)
    try:
        if stored_reference(target) is None:
            checked = load_file(target).validate()
        else:
            from .session import opened_store  # the stores load only for a stored name

            async with opened_store(db, create=False, read_only=True) as store:
                checked = (await load_target(target, store)).validate()
    except DefinitionError as exc:
        err.print(output.problems_text(exc, target), end="")
        return ExitCode.USAGE
    except StoreError as exc:
        from ..errors import StoreUnreachable
        from ..store.url import shown_url

        err.print(output.error_text(f"store {shown_url(db)}: {exc}"))
        return ExitCode.UNREACHABLE if isinstance(exc, StoreUnreachable) else ExitCode.USAGE
    from ..observe.graph import dot, mermaid

    text = dot(checked) if fmt == "dot" else mermaid(checked)
    sys.stdout.write(text)
    return ExitCode.OK


def exit_now(code: int) -> NoReturn:
    """Exit with ``code``.  A sync step still running in a worker thread after the run
    ended (cancelled, or timed out) cannot be stopped, and Python would wait for it at
    exit; the run is already recorded, so leave without waiting for it."""
    from ..runtime.threads import shutdown_shared

    sys.stdout.flush()
    sys.stderr.flush()
    shutdown_shared()  # the idle step threads leave now
    deadline = time.monotonic() + _IDLE_THREAD_GRACE_S
    for thread in threading.enumerate():
        if thread.name.startswith("plait-step"):
            # idle pool threads leave as soon as the executor is shut down
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                os._exit(code)
    sys.exit(code)
