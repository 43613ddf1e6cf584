"""Every YAML example is valid, and its python steps import from next to it."""

from __future__ import annotations

import sys


def test_every_flow_validates(examples_dir, run_command_in_root):
    flows = sorted(str(p.relative_to(examples_dir.parent))
                   for p in examples_dir.glob("*/flow.yaml"))
    assert len(flows) == 9
    proc = run_command_in_root(sys.executable, "-m", "plait", "validate", *flows)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count(": valid") == 9
