"""A decision recorded that could not continue the run is said on the run page, with the
command that continues it, instead of an Approve button that is active again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from .conftest import serve

STEPS = "def a():\n    return 1\n\n\ndef b(a):\n    return a + 41\n"
FLOW = """\
name: gate
steps:
  - {id: a, type: python, call: 'gatesteps:a'}
  - {id: ok, type: approval, depends_on: [a], prompt: 'Go on?'}
  - {id: b, type: python, call: 'gatesteps:b', depends_on: [ok]}
"""


def _plait(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PLAIT_", "FORCE_"))}
    return subprocess.run([sys.executable, "-m", "plait", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)


def test_a_stuck_decision_shows_why_and_how_to_continue(tmp_path: Path, browser: Any,
                                                        page: Any) -> None:
    (tmp_path / "gatesteps.py").write_text(STEPS)
    (tmp_path / "flow.yaml").write_text(FLOW)
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    started = _plait("run", "flow.yaml", "--db", db, "--json", cwd=tmp_path)
    assert started.returncode == 3, started.stderr
    run_id = json.loads(started.stdout)["run_id"]
    (tmp_path / "gatesteps.py").rename(tmp_path / "gatesteps.moved")  # cannot import now
    approved = _plait("approve", run_id, "ok", "--db", db, cwd=tmp_path)
    assert "decision recorded, could not continue" in approved.stderr

    for server in serve(db, None, env={"PLAIT_ALLOWED_MODULES": "gatesteps"}):
        page.goto(f"{server.base}/#/runs/{run_id}")
        note = page.wait_for_selector("[data-testid=continuation]")
        text = note.inner_text()
        assert "Decision on ok recorded, could not continue" in text
        assert "gatesteps" in text and f"plait resume {run_id}" in text
        # the decision stands: no button asks for it again, in the banner or the panel
        assert page.locator("[data-testid=approvals] [data-step=ok]").count() == 0
        page.click(".steps [data-step=ok]")
        page.wait_for_selector("[data-testid=step-detail] [data-testid=continuation]")
        assert page.locator("button[data-action=approve]").count() == 0
        page.goto("about:blank")  # its event stream closed: the server stops at once
