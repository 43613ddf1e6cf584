"""How ``plait run`` shows a run: one JSON object, one status line, a plain summary for
pipes, or live progress and a summary table on a terminal."""

from __future__ import annotations

import contextlib
import os
import sys
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Protocol, TextIO

from ..core.validate import CheckedWorkflow
from ..runtime.results import RunResult
from ..store.base import RunRecord, StepRecord, WriteBatch
from . import output

if TYPE_CHECKING:
    from rich.console import Console

    from .detach import Detached



class Listener(Protocol):
    """What live progress needs of the engine: every committed batch (``apply``, an
    ``Engine.listeners`` callback) and each run it starts driving (``watch``, a
    ``RunObserver``: how child runs are told apart)."""

    def apply(self, batch: WriteBatch) -> None: ...

    def watch(self, run: RunRecord, checked: CheckedWorkflow) -> None: ...


class RunScreen(ABC):
    """Base view: no live progress; subclasses say how the result is shown."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr

    @contextlib.contextmanager
    def progress(self, checked: CheckedWorkflow, run: RunRecord,
                 steps: Sequence[StepRecord] = ()) -> Iterator[Listener | None]:
        """While the run executes: yields the listener of live progress, or None.
        ``steps`` are the run's stored steps when it does not start from scratch."""
        yield None

    @abstractmethod
    def finish(self, result: RunResult) -> None:
        """Show the run's outcome (each view: JSON, quiet, plain or terminal)."""

    def detached(self, run: RunRecord, started: Detached) -> None:
        """``run --detach``: the run id alone on stdout (``RUN=$(plait run f --detach)``),
        what happens to it on stderr."""
        self.out.write(run.run_id + "\n")
        self.out.flush()
        self.notices().print(
            f"run {run.run_id} of {run.workflow} v{run.version} continues in the "
            f"background (pid {started.pid}); its output goes to {started.log}; follow it "
            f"with `plait show {run.run_id}`", highlight=False, markup=False)

    def submitted(self, run: RunRecord) -> None:
        """``run --detach`` on PostgreSQL: the run id alone on stdout, who runs it on
        stderr."""
        self.out.write(run.run_id + "\n")
        self.out.flush()
        self.notices().print(
            f"run {run.run_id} of {run.workflow} v{run.version} is stored; the workers "
            f"execute it; follow it with `plait show {run.run_id}`",
            highlight=False, markup=False)

    def handed_off(self, result: RunResult, message: str) -> None:
        """The run is continued by another process: say so (``result``: the run now)."""
        self.out.write(message + "\n")

    def interrupted(self, presses: int) -> None:
        """Ctrl-C was pressed ``presses`` times during the run (said on stderr)."""
        message = ("cancelling the run (press Ctrl-C again to stop at once)" if presses == 1
                   else "stopping at once")
        from rich.text import Text

        self.notices().print(Text(message, "yellow"))

    def notices(self) -> Console:
        """Where notices during the run go."""
        return output.console(self.err)


class JsonView(RunScreen):
    """``--json``: exactly one JSON object on stdout (docs/cli.md); the status line of a run
    that did not complete goes to stderr.  While the run executes, whatever its steps
    print (or the programs they start) goes to stderr, so stdout stays parseable."""

    @contextlib.contextmanager
    def progress(self, checked: CheckedWorkflow, run: RunRecord,
                 steps: Sequence[StepRecord] = ()) -> Iterator[Listener | None]:
        with stdout_to_stderr():
            yield None

    def finish(self, result: RunResult) -> None:
        output.print_json(result.to_json(), self.out)
        if result.status != "completed":
            self.err.write(output.status_line(result) + "\n")

    def detached(self, run: RunRecord, started: Detached) -> None:
        """``{"run_id", "workflow", "version", "status", "pid", "log"}``."""
        output.print_json({"run_id": run.run_id, "workflow": run.workflow,
                           "version": run.version, "status": str(run.status),
                           "pid": started.pid, "log": str(started.log)}, self.out)

    def submitted(self, run: RunRecord) -> None:
        """``{"run_id", "workflow", "version", "status"}``."""
        output.print_json({"run_id": run.run_id, "workflow": run.workflow,
                           "version": run.version, "status": str(run.status)}, self.out)

    def handed_off(self, result: RunResult, message: str) -> None:
        output.print_json(result.to_json(), self.out)
        self.err.write(message + "\n")


class QuietView(RunScreen):
    """``--quiet``: the final status line only."""

    def finish(self, result: RunResult) -> None:
        self.out.write(output.status_line(result) + "\n")

    def detached(self, run: RunRecord, started: Detached) -> None:
        self.out.write(run.run_id + "\n")

    def submitted(self, run: RunRecord) -> None:
        self.out.write(run.run_id + "\n")


class PlainView(RunScreen):
    """stdout is not a terminal: a plain summary, the output and the status line."""

    def finish(self, result: RunResult) -> None:
        self.out.write(output.plain_summary(result))
        hint = output.waiting_hint(result)
        if hint:
            self.out.write(hint + "\n")
        self.out.write(output.status_line(result) + "\n")


class TerminalView(RunScreen):
    """A terminal: live progress while the run executes, then a summary table."""

    def __init__(self, console: Console) -> None:
        super().__init__()
        self.console = console

    @contextlib.contextmanager
    def progress(self, checked: CheckedWorkflow, run: RunRecord,
                 steps: Sequence[StepRecord] = ()) -> Iterator[Listener | None]:
        from .progress import LiveProgress, ProgressModel, ProgressView

        model = ProgressModel(checked.graph.ids, run.run_id)
        model.seed(steps)
        title = f"{checked.name} v{run.version}"
        with LiveProgress(self.console, ProgressView(title, model)):
            yield model

    def notices(self) -> Console:
        return self.console  # above the live display, which redraws below it

    def finish(self, result: RunResult) -> None:
        from rich.text import Text

        self.console.print(output.summary_table(result))
        if result.output is not None:
            self.console.print(Text("output", "bold"))
            text, cut = output.output_json(result.output)
            if cut:
                self.console.print(text, markup=False)
            else:
                self.console.print_json(text)
        hint = output.waiting_hint(result)
        if hint:
            self.console.print(Text(hint, "yellow"))
        self.console.print(Text(output.status_line(result),
                                output.status_style(result.status)))


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send file descriptor 1 (and ``sys.stdout``) to stderr for the duration."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no real descriptors (embedded): redirect Python's stdout only
        with contextlib.redirect_stdout(sys.stderr):
            yield
        return
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def choose_view(*, as_json: bool, quiet: bool) -> RunScreen:
    """``--json`` wins over ``--quiet``; otherwise a terminal gets live progress."""
    if as_json:
        return JsonView()
    if quiet:
        return QuietView()
    if _surely_not_a_terminal(sys.stdout):
        return PlainView()
    console = output.console()
    if console.is_terminal:
        return TerminalView(console)
    return PlainView()


def _surely_not_a_terminal(out: TextIO) -> bool:
    """``out`` is no terminal and no variable rich reads (TTY_COMPATIBLE, FORCE_COLOR)
    asks to treat it as one: decided without importing rich, which a run whose summary
    goes to a pipe never needs."""
    compatible = os.environ.get("TTY_COMPATIBLE", "")
    if compatible == "0":
        return True
    if compatible == "1" or "FORCE_COLOR" in os.environ:
        return False
    try:
        return not out.isatty()
    except ValueError:  # closed
        return True
