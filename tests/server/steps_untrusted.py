"""A module an untrusted definition's test is allowed to call (server.steps_untrusted),
holding every spelling an attacker tried: a private function, an imported module
reachable as an attribute path, and a function re-exported from elsewhere.  Each of
them, if called, creates the file it is given: the tests assert it never exists."""

from __future__ import annotations

import os  # reachable as `server.steps_untrusted:os.system` if attribute paths resolved
import tempfile
from pathlib import Path
from subprocess import getoutput  # re-exported: `server.steps_untrusted:getoutput`

__all__ = ["getoutput", "marker_of", "notified", "os", "public"]


def public(path: str = "") -> str:
    """The one function a definition may call here (it touches nothing)."""
    return "public"


def _touch(path: str) -> str:
    Path(path).touch()
    return "touched"


def marker_of(kind: str, run_id: str) -> Path:
    """Where ``notified`` (kind "notified") or ``_notified`` ("private") mark a run."""
    return Path(tempfile.gettempdir()) / f"plait-test-{kind}-{run_id}"


def notified(body: dict[str, object]) -> None:
    """A notify target a definition may name: marks the run it was told about."""
    marker_of("notified", str(body["run_id"])).touch()


def _notified(body: dict[str, object]) -> None:
    marker_of("private", str(body["run_id"])).touch()
