"""The orchestrator's side of a measurement: start child.py, collect its JSON, and the
bits every RESULTS.md shares (machine header, number formats, markdown tables)."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CHILD = HERE / "child.py"


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """One child process to run: which adapter, on which workload, how many times."""

    adapter: str  # MODULE:CLASS
    spec: str  # workload spec for child.make_workload
    repeats: int
    warmup: int = 0
    python: str = sys.executable
    options: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 120.0
    budget_s: float | None = None  # stop repeating once measured runs took this long


@dataclass(slots=True, kw_only=True)
class Measurement:
    """What a child reported (or why it reported nothing)."""

    job: Job
    data: dict[str, Any]
    elapsed_s: float

    @property
    def ok(self) -> bool:
        return "median_s" in self.data and "error" not in self.data

    @property
    def problem(self) -> str | None:
        """Why there is no number: unsupported, error or timeout; None when ok."""
        if self.ok:
            return None
        return str(self.data.get("unsupported") or self.data.get("error") or "no result")

    @property
    def median_s(self) -> float:
        return float(self.data["median_s"])

    @property
    def steps(self) -> int:
        return int(self.data.get("steps", 0))

    @property
    def per_step_us(self) -> float:
        return self.median_s / self.steps * 1e6

    @property
    def cpu_per_step_us(self) -> float:
        return float(self.data["median_cpu_s"]) / self.steps * 1e6

    @property
    def first_s(self) -> float:
        """The first run in a fresh process (cold: lazy imports and first-use caches)."""
        return float(self.data["first_s"])

    @property
    def makespan_ratio(self) -> float:
        return self.median_s / float(self.data["critical_path_s"])

    @property
    def peak_mb(self) -> float:
        return float(self.data.get("peak_rss_mb", 0.0))

    @property
    def helpers_mb(self) -> float:
        """Peak memory of processes the engine started (e.g. a local server)."""
        return float(self.data.get("helpers_peak_rss_mb", 0.0))

    def peak_text(self) -> str:
        helpers = f" + {self.helpers_mb:,.0f}" if self.helpers_mb >= 1 else ""
        return f"{self.peak_mb:,.0f}{helpers}"

    def phase(self, name: str) -> float | None:
        value = self.data.get("phases", {}).get(name)
        return None if value is None else float(value)


def command_text(job: Job) -> str:
    """The child command that produced a measurement, in the short form the reports
    quote (run from the repository with ``.venv/bin/python``; add ``--out FILE``)."""
    opts = " ".join(f"--opt {shlex.quote(f'{k}={v}')}" for k, v in job.options.items())
    return " ".join(p for p in (f"benchmarks/child.py {job.adapter} {job.spec}", opts) if p)


def merge(parts: list[Measurement]) -> Measurement:
    """One measurement from several rounds of the same job: all walls pooled (median over
    them), peaks maxed, one-off timings (build, phases) by median.  Rounds interleaved
    with other engines' keep a burst of load on a shared machine from biasing one side."""
    first = next((p for p in parts if p.ok), parts[0])
    if not all(p.ok for p in parts):
        bad = next(p for p in parts if not p.ok)
        return Measurement(job=first.job, data=bad.data, elapsed_s=sum(p.elapsed_s for p in parts))
    data = dict(first.data)
    for key in ("walls", "cpus"):
        data[key] = [w for p in parts for w in p.data[key]]
    data["median_s"] = statistics.median(data["walls"])
    data["median_cpu_s"] = statistics.median(data["cpus"])
    data["first_s"] = statistics.median(float(p.data["first_s"]) for p in parts)
    for key in ("peak_rss_mb", "helpers_peak_rss_mb"):
        data[key] = max(float(p.data.get(key, 0.0)) for p in parts)
    data["build_s"] = statistics.median(float(p.data.get("build_s", 0.0)) for p in parts)
    phases = [p.data["phases"] for p in parts if "phases" in p.data]
    if phases:
        data["phases"] = {k: statistics.median(ph[k] for ph in phases) for k in phases[0]}
    return Measurement(job=first.job, data=data, elapsed_s=sum(p.elapsed_s for p in parts))


def measure(job: Job) -> Measurement:
    """Run one child.py to completion or its timeout; never raises for a bad child."""
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [job.python, str(CHILD), job.adapter, job.spec, "--out", str(out),
               "--repeats", str(job.repeats), "--warmup", str(job.warmup)]
        cmd += [f"--opt={k}={v}" for k, v in job.options.items()]
        if job.budget_s is not None:
            cmd += ["--budget", str(job.budget_s)]
        start = time.perf_counter()
        data = _run_child(cmd, job.timeout_s, out)
        return Measurement(job=job, data=data, elapsed_s=time.perf_counter() - start)


def _run_child(cmd: list[str], timeout_s: float, out: Path) -> dict[str, Any]:
    # A new session lets a timeout kill the child's own helpers too (e.g. a local server).
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, env=os.environ.copy())
    try:
        log, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"error": f"timed out after {timeout_s:.0f} s"}
    _reap_group(proc.pid)
    if not out.exists():
        tail = log.decode(errors="replace").strip().splitlines()[-5:]
        return {"error": f"child exited {proc.returncode} without a result: {' | '.join(tail)}"}
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def _reap_group(pgid: int) -> None:
    """Kill whatever the child left behind in its session (servers it started)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # nothing left in that session


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- report helpers ---------------------------------------------------------------------

def machine_header(title: str, extra: Iterable[str] = ()) -> list[str]:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# {title}", "",
             "Generated by a script; do not edit by hand.", "",
             f"- date: {now}",
             f"- machine: {cpu_model()}, {os.cpu_count()} cores, {memory_gib():.0f} GiB",
             f"- Python: {platform.python_version()} ({platform.python_implementation()})",
             f"- git commit: {git_commit()}",
             f"- load average when this report was written (1, 5, 15 min): {load()}"]
    lines += [f"- {line}" for line in extra]
    return lines + [""]


def load() -> str:
    """Other work on the machine skews timings; the report says how busy it was."""
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown cpu"


def memory_gib() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        return 0.0


def git_commit() -> str:
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""
    commit = git("rev-parse", "--short=12", "HEAD") or "none yet"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return commit + (" (with uncommitted changes)" if dirty else "")


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c).replace("|", "/") for c in row) + " |" for row in rows]
    return lines + [""]


def fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds >= 10:
        return f"{seconds:.1f} s"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    return f"{seconds * 1000:.1f} ms" if seconds >= 0.001 else f"{seconds * 1e6:.0f} µs"


def fmt_num(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def met(ok: bool | None) -> str:
    return "n/a" if ok is None else ("yes" if ok else "**NO**")
