"""A store whose server cannot be reached is tried again for ``$PLAIT_CONNECT_WAIT``
seconds, then the command exits 4 (store unreachable), never the usage code 2."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

CLOSED = "postgresql://postgres@127.0.0.1:1/x"  # nothing listens on port 1
RUN_ID = "0123456789abcdef0123456789abcdef"
FLOW = "name: t\nsteps:\n  - {id: a, type: transform, value: 1}\n"


def test_run_detach_waits_then_exits_4(plait, tmp_path: Path) -> None:
    (tmp_path / "flow.yaml").write_text(FLOW)
    started = time.monotonic()
    proc = plait("run", "flow.yaml", "--detach", "--db", CLOSED,
                 env={"PLAIT_CONNECT_WAIT": "1"})
    assert proc.returncode == 4, proc.stderr
    assert time.monotonic() - started >= 1.0  # tried again before giving up
    assert "store unreachable" in proc.stderr and "127.0.0.1:1" in proc.stderr
    assert "tried for 1s" in proc.stderr and "PLAIT_CONNECT_WAIT" in proc.stderr


@pytest.mark.parametrize("args", [
    ("approve", RUN_ID, "sign_off"), ("approve", RUN_ID, "sign_off", "--detach"),
    ("resume", RUN_ID), ("show", RUN_ID), ("runs",), ("cancel", RUN_ID),
    ("retry", RUN_ID)])
def test_every_command_on_a_store_exits_4(plait, args: tuple[str, ...]) -> None:
    proc = plait(*args, "--db", CLOSED, env={"PLAIT_CONNECT_WAIT": "0"})
    assert proc.returncode == 4, (proc.stdout, proc.stderr)
    assert "store unreachable" in proc.stderr and "tried once" in proc.stderr


def test_connect_wait_setting() -> None:
    from plait.cli.settings import DEFAULT_CONNECT_WAIT_S, connect_wait

    assert connect_wait({}) == DEFAULT_CONNECT_WAIT_S == 5.0
    assert connect_wait({"PLAIT_CONNECT_WAIT": "2.5"}) == 2.5
    assert connect_wait({"PLAIT_CONNECT_WAIT": "0"}) == 0.0
    for bad in ("soon", "-1", "inf", "nan"):
        assert connect_wait({"PLAIT_CONNECT_WAIT": bad}) == DEFAULT_CONNECT_WAIT_S
