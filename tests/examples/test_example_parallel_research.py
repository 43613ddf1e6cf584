"""examples/parallel_research: 3 researchers in parallel -> 2 analysts in turn -> 1."""

from __future__ import annotations


def test_researchers_overlap_and_analysts_take_turns(load_example):
    example = load_example("parallel_research")
    result = example.wf.run({"topic": "robots"})
    assert result.status == "completed"
    steps = result.steps
    researchers = [steps[s] for s in example.RESEARCHERS]
    # the three researchers ran at the same time: their intervals all intersect
    together = example.overlap_seconds(result, example.RESEARCHERS)
    assert together > example.MODEL_SECONDS / 2
    assert max(r.started_at for r in researchers) < min(r.finished_at for r in researchers)
    # the analysts ran in turn, after every researcher; the synthesiser last
    trends, critic, synth = steps["analyst_trends"], steps["analyst_critic"], steps["synthesise"]
    assert trends.started_at >= max(r.finished_at for r in researchers)
    assert critic.started_at >= trends.finished_at
    assert synth.started_at >= critic.finished_at
    # so the run took about 4 model calls, not 6
    assert result.duration_s < 5.5 * example.MODEL_SECONDS
    report = result.output["synthesise"]
    assert report["reviewed"] is True
    assert report["report"].splitlines() == [
        "Report on robots",
        "- robots buyers are platform teams",
        "- robots run as graphs of model and tool calls",
        "- robots fail on flaky APIs, so calls need retries",
    ]
    assert steps["analyst_critic"].output["note"] == (
        "critic: review of: trend analyst: 3 facts")


def test_runs_with_one_command(run_script):
    proc = run_script("parallel_research/main.py", "AI agents")
    assert proc.returncode == 0, proc.stderr
    assert "the three researchers ran together for 0." in proc.stdout
    assert "status: completed" in proc.stdout
    assert "- AI agents fail on flaky APIs, so calls need retries" in proc.stdout
