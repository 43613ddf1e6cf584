"""`plait run NAME@V`: a stored version runs as it is stored, and a missing version is
named with the versions that exist."""

from __future__ import annotations

import json

V1 = """
    name: edit
    steps:
      - {id: say, type: transform, value: one}
"""

V2 = """
    name: edit
    steps:
      - {id: say, type: transform, value: two}
"""


def stored_twice(plait, write) -> dict[int, str]:
    """v1 then v2 of `edit` stored by running the file before and after an edit;
    returns each version's fingerprint."""
    fingerprints = {}
    for version, text in ((1, V1), (2, V2)):
        write("edit.yaml", text)
        proc = plait("run", "edit.yaml", "--json")
        assert proc.returncode == 0, proc.stderr
        run = json.loads(proc.stdout)
        assert run["version"] == version
        shown = json.loads(plait("show", run["run_id"], "--json").stdout)
        fingerprints[version] = shown["fingerprint"]
    assert fingerprints[1] != fingerprints[2]
    return fingerprints


def test_name_at_version_runs_that_version_and_leaves_latest_alone(plait, write, tmp_path):
    fingerprints = stored_twice(plait, write)
    (tmp_path / "edit.yaml").unlink()  # `edit` now names the stored workflow only

    old = plait("run", "edit@1", "--json")
    assert old.returncode == 0, old.stderr
    old_run = json.loads(old.stdout)
    assert (old_run["version"], old_run["output"]) == (1, {"say": "one"})

    latest = plait("run", "edit", "--json")
    assert latest.returncode == 0, latest.stderr
    latest_run = json.loads(latest.stdout)
    assert (latest_run["version"], latest_run["output"]) == (2, {"say": "two"})

    runs = json.loads(plait("runs", "--json").stdout)["runs"]
    by_id = {r["run_id"]: r for r in runs}
    assert len(runs) == 4  # v1, v2, edit@1, edit: no run of a third version
    assert (by_id[old_run["run_id"]]["version"],
            by_id[old_run["run_id"]]["fingerprint"]) == (1, fingerprints[1])
    assert (by_id[latest_run["run_id"]]["version"],
            by_id[latest_run["run_id"]]["fingerprint"]) == (2, fingerprints[2])
    assert {r["version"] for r in runs} == {1, 2}


def test_a_missing_version_names_the_stored_ones(plait, write, tmp_path):
    stored_twice(plait, write)
    (tmp_path / "edit.yaml").unlink()
    proc = plait("run", "edit@99")
    assert proc.returncode == 2
    assert "workflow 'edit' has versions 1, 2; no version 99" in proc.stderr
    assert "run it once" not in proc.stderr  # it is stored: no advice to store it
    assert "edit@2" in proc.stderr
    assert len(json.loads(plait("runs", "--json").stdout)["runs"]) == 2  # nothing stored


def test_running_an_earlier_definition_again_reuses_its_version(plait, write):
    """Files A and B define `p` differently: A, B, A stores two versions, and the third
    run records version 1 (the same fingerprint is the same version)."""
    write("a.yaml", "name: p\nsteps:\n  - {id: say, type: transform, value: one}\n")
    write("b.yaml", "name: p\nsteps:\n  - {id: say, type: transform, value: two}\n")
    runs = []
    for target in ("a.yaml", "b.yaml", "a.yaml"):
        proc = plait("run", target, "--json")
        assert proc.returncode == 0, proc.stderr
        runs.append(json.loads(proc.stdout))
    assert [r["version"] for r in runs] == [1, 2, 1]
    assert runs[2]["output"] == {"say": "one"}
    shown = [json.loads(plait("show", r["run_id"], "--json").stdout) for r in runs]
    assert shown[0]["fingerprint"] == shown[2]["fingerprint"] != shown[1]["fingerprint"]
    missing = plait("run", "p@3")
    assert missing.returncode == 2
    assert "workflow 'p' has versions 1, 2; no version 3" in missing.stderr


def test_a_stated_version_stored_with_another_definition_is_refused(plait, write):
    write("a.yaml", "name: p\nsteps:\n  - {id: say, type: transform, value: one}\n")
    write("b.yaml", "name: p\nversion: 1\nsteps:\n"
                    "  - {id: say, type: transform, value: two}\n")
    assert plait("run", "a.yaml").returncode == 0
    refused = plait("run", "b.yaml")
    assert refused.returncode == 2, refused.stderr
    assert "version 1 is stored with fingerprint" in refused.stderr
