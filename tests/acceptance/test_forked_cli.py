"""The acceptance tests fork ``plait`` from a warm process (tests/plaitproc.py): a forked
command must behave as ``python -m plait`` started afresh does, or every test built on it
would test something else."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import plaitproc
from conftest import cli_env

pytestmark = pytest.mark.skipif(not plaitproc.enabled(), reason="PLAIT_TEST_FORKSERVER=0")

FLOW = """\
name: forked
input: {type: object, required: [who], properties: {who: {type: string}}}
steps:
  - {id: greet, type: transform, value: "hello {{ input.who }}"}
  - {id: shout, type: python, call: "local_steps:shout", with: {text: "{{ steps.greet.output }}"}}
output: {said: "{{ steps.shout.output }}"}
"""


def _fresh(args: list[str], cwd: Path, env: dict[str, str],
           stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "plait", *args], cwd=cwd, env=env,
                          input=stdin, capture_output=True, text=True, timeout=30)


def _same(text: str) -> str:
    """Output with what differs between any two runs (ids, times) blanked."""
    return re.sub(r"[0-9a-f]{32}|\d+(\.\d+)?(ms|s)\b|\"duration_s\": [\d.e-]+|"
                  r"\d{4}-\d\d-\d\dT[\d:.]+(Z|[+-]\d\d:\d\d)?", "_", text)


@pytest.mark.parametrize("args", [
    ["--help"],
    ["no-such-command"],
    ["run", "missing.yaml"],
    ["run", "flow.yaml", "--input", '{"who": 1}'],
    ["run", "flow.yaml", "--input", '{"who": "ada"}', "--json"],
    ["run", "flow.yaml", "--input", '{"who": "ada"}'],
    ["validate", "flow.yaml"],
    ["history", "--json"],
], ids=lambda args: " ".join(args)[:40])
def test_a_forked_command_answers_as_a_fresh_interpreter_does(
        tmp_path: Path, args: list[str]) -> None:
    (tmp_path / "flow.yaml").write_text(FLOW)
    (tmp_path / "local_steps.py").write_text("def shout(text):\n    return text.upper()\n")
    env = cli_env()
    fresh = _fresh(args, tmp_path, env)
    forked = plaitproc.run(args, cwd=tmp_path, env=env, timeout=30)
    assert forked.returncode == fresh.returncode, (forked.stderr, fresh.stderr)
    assert _same(forked.stdout) == _same(fresh.stdout)
    assert _same(forked.stderr) == _same(fresh.stderr)


def test_a_forked_command_has_its_own_environment_directory_and_stdin(tmp_path: Path) -> None:
    """The child sees the environment, working directory and PYTHONPATH it was given
    (not the warm process's), and reads its own stdin."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "probe.py").write_text(
        "import os, sys\n"
        "def where(text):\n"
        "    return {'cwd': os.getcwd(), 'marker': os.environ.get('PROBE_MARKER'),\n"
        "            'text': text, 'lib_first': sys.path.index(os.environ['PROBE_LIB'])}\n")
    (tmp_path / "flow.yaml").write_text(
        "name: probe\nsteps:\n"
        "  - {id: p, type: python, call: 'probe:where', with: {text: '{{ input.text }}'}}\n"
        "output: {p: '{{ steps.p.output }}'}\n")
    env = cli_env(PROBE_MARKER="forked", PROBE_LIB=str(lib), PYTHONPATH=str(lib))
    done = plaitproc.run(["run", "flow.yaml", "--input-file", "-", "--json"], cwd=tmp_path,
                         env=env, input='{"text": "from stdin"}', timeout=30)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)["output"]["p"]
    assert seen["cwd"] == str(tmp_path)
    assert seen["marker"] == "forked"
    assert seen["text"] == "from stdin"
    assert seen["lib_first"] <= 2  # after the working directory, as `python -m` puts it


def test_a_forked_command_dies_of_its_own_signal(tmp_path: Path) -> None:
    (tmp_path / "flow.yaml").write_text(
        "name: slow\nsteps:\n  - {id: s, type: shell, command: 'sleep 30'}\n")
    proc = plaitproc.popen(["run", "flow.yaml"], cwd=tmp_path, env=cli_env(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL
