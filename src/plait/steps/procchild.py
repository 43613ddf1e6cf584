"""The child side of ``executor: process`` (``steps.procexec``): run as the source of a
fresh interpreter (``python -c``), it imports nothing of plait, so it starts fast and
runs none of the worker's ``__main__``.

It reads one JSON request on stdin (``call``: ``module:function``; ``kwargs``;
``path``: the worker's ``sys.path``; ``worker``: its pid), calls the function and
writes one JSON answer on the stdout it was given: ``{"ok": value}`` or ``{"error":
{names, message, retryable, retry_after, traceback}}``.  What the function prints goes
to stderr, never into the answer.  On Linux it dies with the worker.
"""

import importlib
import json
import os
import signal
import sys
import traceback
from collections.abc import Callable
from typing import Any


def _function(call: str) -> Callable[..., object]:
    module_name, _, qualname = call.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj  # type: ignore[no-any-return]


def _described(exc: BaseException) -> dict[str, object]:
    names = [c.__name__ for c in type(exc).__mro__
             if c not in (object, BaseException, Exception)] or [type(exc).__name__]
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - a step's own exception class
        text = f"<{type(exc).__name__} whose message could not be made (str() raised)>"
    # a plait StepError that says never retry (plait's own classes are not imported)
    retryable = getattr(exc, "retryable", True) if "StepError" in names else True
    retry_after = getattr(exc, "retry_after", None)
    if not isinstance(retry_after, int | float) or isinstance(retry_after, bool):
        retry_after = None
    return {"names": names, "message": text, "retryable": bool(retryable),
            "retry_after": retry_after,
            "traceback": "".join(traceback.format_exception(exc, limit=-8))[-4000:]}


def _die_with_the_worker(worker: int) -> None:
    """On Linux, be killed when the worker that started this process dies (a worker
    killed with SIGKILL leaves no child running on): prctl(PR_SET_PDEATHSIG)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # no libc to ask: the child outlives a killed worker
        return
    if os.getppid() != worker:  # it died before the request took hold
        os._exit(1)


def answer_one_call() -> None:
    answer_to = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # the function's prints go to stderr
    request = json.loads(sys.stdin.read())
    _die_with_the_worker(request["worker"])
    sys.path[:] = request["path"]
    try:
        result = _function(request["call"])(**request["kwargs"])
        try:
            answer = json.dumps({"ok": result})
        except (TypeError, ValueError) as exc:
            raise TypeError(f"executor: process returns JSON values only: {exc}") from None
    except BaseException as exc:  # noqa: BLE001 - every failure goes back to the worker
        answer = json.dumps({"error": _described(exc)})
    answer_to.write(answer)
    answer_to.close()


if __name__ == "__main__":
    answer_one_call()
