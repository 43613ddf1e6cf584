"""How ``plait run`` shows a run: one JSON object, one status line, a plain summary for
pipes, or live progress and a summary table on a terminal."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import TextIO

from rich.console import Console
from rich.text import Text

from ..core.validate import CheckedWorkflow
from ..runtime.results import RunResult
from ..store.base import RunRecord, WriteBatch
from . import output
from .progress import LiveProgress, ProgressModel, ProgressView

Listener = Callable[[WriteBatch], None]


class RunView:
    """Base view: no live progress; subclasses say how the result is shown."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr

    @contextlib.contextmanager
    def progress(self, checked: CheckedWorkflow, run: RunRecord) -> Iterator[Listener | None]:
        """While the run executes: yields an engine listener, or None for no progress."""
        yield None

    def finish(self, result: RunResult) -> None:
        raise NotImplementedError

    def interrupted(self, presses: int) -> None:
        """Ctrl-C was pressed ``presses`` times during the run (said on stderr)."""
        message = ("cancelling the run (press Ctrl-C again to stop at once)" if presses == 1
                   else "stopping at once")
        self.notices().print(Text(message, "yellow"))

    def notices(self) -> Console:
        """Where notices during the run go."""
        return output.console(self.err)


class JsonView(RunView):
    """``--json``: exactly one JSON object on stdout (SPEC 8); the status line of a run
    that did not complete goes to stderr.  While the run executes, whatever its steps
    print (or the programs they start) goes to stderr, so stdout stays parseable."""

    @contextlib.contextmanager
    def progress(self, checked: CheckedWorkflow, run: RunRecord) -> Iterator[Listener | None]:
        with stdout_to_stderr():
            yield None

    def finish(self, result: RunResult) -> None:
        output.print_json(result.to_json(), self.out)
        if result.status != "completed":
            self.err.write(output.status_line(result) + "\n")


class QuietView(RunView):
    """``--quiet``: the final status line only."""

    def finish(self, result: RunResult) -> None:
        self.out.write(output.status_line(result) + "\n")


class PlainView(RunView):
    """stdout is not a terminal: a plain summary, the output and the status line."""

    def finish(self, result: RunResult) -> None:
        self.out.write(output.plain_summary(result))
        hint = output.waiting_hint(result)
        if hint:
            self.out.write(hint + "\n")
        self.out.write(output.status_line(result) + "\n")


class TerminalView(RunView):
    """A terminal: live progress while the run executes, then a summary table."""

    def __init__(self, console: Console) -> None:
        super().__init__()
        self.console = console

    @contextlib.contextmanager
    def progress(self, checked: CheckedWorkflow, run: RunRecord) -> Iterator[Listener | None]:
        model = ProgressModel(checked.graph.ids)
        title = f"{checked.name} v{run.version}"
        with LiveProgress(self.console, ProgressView(title, model)):
            yield model.apply

    def notices(self) -> Console:
        return self.console  # above the live display, which redraws below it

    def finish(self, result: RunResult) -> None:
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


def choose_view(*, as_json: bool, quiet: bool) -> RunView:
    """``--json`` wins over ``--quiet``; otherwise a terminal gets live progress."""
    if as_json:
        return JsonView()
    if quiet:
        return QuietView()
    console = output.console()
    if console.is_terminal:
        return TerminalView(console)
    return PlainView()
