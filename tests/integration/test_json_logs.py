"""``plait --log-format json`` / ``PLAIT_LOG_FORMAT``: plait's log lines as one JSON object
per line (docs/observability.md)."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from plait.cli.main import cli
from plait.observe import logs

pytestmark = pytest.mark.slow  # starts `plait` processes

FLOW = """\
name: logged
steps:
  - id: call
    type: http
    url: http://127.0.0.1:1/nothing-listens-here
    retry: {max_retries: 0}
"""
DENIED = json.dumps([{"on": ["run_failed"], "url": "http://169.254.169.254/hook"}])


@pytest.fixture(autouse=True)
def no_leftover_handler() -> None:
    yield
    root = logging.getLogger("plait")
    for handler in [h for h in root.handlers if isinstance(h, logs._PlaitHandler)]:
        root.removeHandler(handler)


def test_a_record_becomes_one_json_object_with_its_extra_fields() -> None:
    stream = io.StringIO()
    logs.configure("json", stream=stream)
    log = logging.getLogger("plait.worker")
    log.warning("run %s lost its lease", "r1", extra={"run_id": "r1", "step_id": "s"})
    try:
        raise KeyError("k")
    except KeyError:
        log.exception("it broke")
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert set(first) == {"ts", "level", "logger", "message", "run_id", "step_id"}
    assert first["level"] == "WARNING" and first["logger"] == "plait.worker"
    assert first["message"] == "run r1 lost its lease"
    assert (first["run_id"], first["step_id"]) == ("r1", "s")
    assert first["ts"].endswith("Z")
    assert second["level"] == "ERROR" and "KeyError" in second["exc"]


def test_text_stays_the_default() -> None:
    stream = io.StringIO()
    logs.configure(stream=stream)  # no PLAIT_LOG_FORMAT in this environment
    logging.getLogger("plait.engine").warning("plain")
    assert stream.getvalue().rstrip().endswith("WARNING plain")


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown log format 'xml'"):
        logs.configure("xml")
    result = CliRunner().invoke(cli, ["--log-format", "xml", "runs"],
                                env={"PLAIT_LOG_FORMAT": None})
    assert result.exit_code == 2
    assert "'xml' is not one of 'text', 'json'" in result.output


def _plait(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "flow.yaml").write_text(FLOW)
    environ = {k: v for k, v in os.environ.items()
               if k not in ("PLAIT_LOG_FORMAT", "PLAIT_NOTIFY")}
    return subprocess.run([sys.executable, "-m", "plait", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60,
                          env={**environ, **env})


@pytest.mark.parametrize("how", ["option", "environment"])
def test_plait_logs_json_lines(tmp_path: Path, how: str) -> None:
    """A failing run whose notification the network policy refuses: the warning of
    the notifier comes out as a JSON line naming the run."""
    db = f"sqlite:///{tmp_path / 'plait.db'}"
    if how == "option":
        done = _plait(["--log-format", "json", "--notify", DENIED, "run", "flow.yaml",
                       "--db", db], tmp_path)
    else:
        done = _plait(["run", "flow.yaml", "--db", db], tmp_path,
                      PLAIT_LOG_FORMAT="json", PLAIT_NOTIFY=DENIED)
    assert done.returncode == 1, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    (note,) = [line for line in lines if line["logger"] == "plait.notify"]
    assert note["level"] == "WARNING"
    assert note["event"] == "run_failed"
    assert note["target"] == "http://169.254.169.254/..."
    assert len(note["run_id"]) == 32
    assert "NetworkRefused" in note["message"]


def test_a_bad_notify_option_is_a_usage_error(tmp_path: Path) -> None:
    done = _plait(["--notify", '[{"on": ["run_fail"], "url": "https://x.example"}]',
                   "runs"], tmp_path)
    assert done.returncode == 2
    assert "notify" in done.stderr and "did you mean 'run_failed'" in done.stderr
