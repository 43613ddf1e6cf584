"""``plait validate`` of definitions that write model settings once: ``defaults``
keyed by step type, ``x-`` keys holding YAML anchors, and ``<<`` merge keys in steps
that also set their own keys (``id`` included)."""

from __future__ import annotations

ANCHORED = """
    name: anchored
    x-llm: &llm
      type: llm
      base_url: https://api.example.com/v1
      api_key_env: EXAMPLE_KEY
    x-fast: &fast {model: small, timeout: 30s}
    defaults:
      llm: {model: large}
      x-note: ignored
    steps:
      - <<: *llm
        id: plan
        prompt: plan it
      - <<: [*fast, *llm]
        id: draft
        depends_on: [plan]
        prompt: draft it
"""


def test_anchors_merge_keys_and_defaults_by_type_validate(plait, write):
    write("flow.yaml", ANCHORED)
    proc = plait("validate", "flow.yaml")
    assert proc.returncode == 0, proc.stderr
    assert "flow.yaml: valid" in proc.stdout


def test_a_key_written_twice_in_a_step_is_still_refused(plait, write):
    write("flow.yaml", ANCHORED.replace("        prompt: plan it",
                                        "        prompt: plan it\n        id: again"))
    proc = plait("validate", "flow.yaml")
    assert proc.returncode == 1
    assert ("duplicate key 'id' at line 14, column 5 (first at line 12, column 5)"
            in proc.stderr), proc.stderr


def test_unknown_fields_and_types_under_defaults(plait, write):
    write("flow.yaml", ANCHORED.replace("llm: {model: large}",
                                        "llm: {modle: large}\n      lmm: {}"))
    proc = plait("validate", "flow.yaml")
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert any(line.startswith("  - defaults.llm.modle: unknown field")
               and "did you mean 'model'?" in line for line in lines), proc.stderr
    assert any(line.startswith("  - defaults.lmm: unknown field for defaults")
               and "did you mean 'llm'?" in line for line in lines), proc.stderr
    # plan has no model now: said at the step, with where else it may come from
    assert any(line.startswith("  - steps[0].model: missing field 'model'")
               and "under defaults.llm" in line for line in lines), proc.stderr
