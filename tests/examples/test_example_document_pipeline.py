"""examples/document_pipeline: dependencies inferred from declared output keys."""

from __future__ import annotations

CSV = """\
page,category,keywords,words,first_words
1,invoice,invoice acme hammers payment steel,12,Invoice 1042 from Acme
2,invoice,invoice acme hammers payment steel,12,four boxes of nails.
3,invoice,invoice acme hammers payment steel,12,invoice date. Late payment
4,invoice,invoice acme hammers payment steel,12,two percent per month.
5,invoice,invoice acme hammers payment steel,1,Tools.
"""


def test_dependencies_come_from_output_keys(load_example):
    example = load_example("document_pipeline")
    deps = {s.id: set(s.depends_on) for s in example.wf.spec.steps}
    assert deps == {"decrypt": set(), "paginate": {"decrypt"},
                    "classify": {"paginate"}, "extract_keywords": {"paginate"},
                    "to_csv": {"paginate", "classify", "extract_keywords"}}
    plan = example.wf.plan()
    assert [set(stage) for stage in plan.stages] == [
        {"decrypt"}, {"paginate"}, {"classify", "extract_keywords"}, {"to_csv"}]


def test_the_pipeline_writes_the_csv(load_example):
    example = load_example("document_pipeline")
    result = example.wf.run({"ciphertext": example.SAMPLE})
    assert result.status == "completed"
    assert result.output == {"to_csv": CSV}
    assert result.steps["classify"].output == "invoice"
    assert result.steps["extract_keywords"].output == [
        "invoice", "acme", "hammers", "payment", "steel"]


def test_runs_with_one_command(run_script):
    proc = run_script("document_pipeline/main.py")
    assert proc.returncode == 0, proc.stderr
    assert "stages: decrypt | paginate | classify, extract_keywords | to_csv" in proc.stdout
    assert proc.stdout.endswith(CSV)
