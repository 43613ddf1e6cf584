"""examples/data_collection: a map over a list only known at run time, in YAML and in
Python."""

from __future__ import annotations

import json
import sys

FLOW = "data_collection/flow.yaml"
ACTIVE = ["LIS", "OPO", "FNC", "BGC"]


def test_the_map_fans_out_over_the_discovered_stations(plait_run, run_command_in_root):
    code, result, stderr = plait_run(FLOW)
    assert code == 0, stderr
    assert result["status"] == "completed"
    steps = result["steps"]
    assert [s["id"] for s in steps["discover"]["output"]] == ACTIVE
    # the map's output: one entry per station, in catalogue order
    assert [r["station"] for r in steps["collect"]["output"]] == ACTIVE
    assert [r["position"] for r in steps["collect"]["output"]] == [0, 1, 2, 3]
    assert result["output"]["collected"] == ACTIVE
    report = result["output"]["report"]
    assert report["stations"] == 4
    assert (report["warmest"], report["coldest"]) == ("Funchal", "Braganca")
    assert report["by_city"] == {"Lisbon": 21.48, "Porto": 21.58, "Funchal": 21.78,
                                 "Braganca": 17.48}
    assert report["mean_of_means"] == round((21.48 + 21.58 + 21.78 + 17.48) / 4, 2)

    # each item is a step of its own with its own attempts: Porto failed once
    items = {f"collect[{i}]": steps[f"collect[{i}]"] for i in range(4)}
    assert all(s["status"] == "completed" for s in items.values())
    assert [s["attempts"] for s in items.values()] == [1, 2, 1, 1]
    assert "collect[4]" not in steps

    proc = run_command_in_root(sys.executable, "-m", "plait", "show", result["run_id"],
                               "--json")
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)
    assert [k for k in shown["steps"] if k.startswith("collect[")] == list(items)
    porto = [(a["attempt"], a["status"], a["error"]) for a in shown["attempts"]
             if a["step"] == "collect[1]"]
    assert porto == [(1, "failed", "ConnectionError: feed of station OPO timed out (call 1)"),
                     (2, "completed", None)]


def test_the_list_decides_the_width_of_the_fan_out(plait_run):
    code, result, _ = plait_run(FLOW, {"include_inactive": True})
    assert code == 0
    assert result["output"]["collected"] == ["LIS", "OPO", "FAO", "FNC", "BGC"]
    assert result["steps"]["collect[4]"]["output"]["city"] == "Braganca"
    assert result["output"]["report"]["warmest"] == "Faro"


def test_the_python_version_gives_the_same_report(run_script, plait_run):
    proc = run_script("data_collection/main.py")
    assert proc.returncode == 0, proc.stderr
    assert "collect[1]   completed  attempts=2" in proc.stdout
    printed = json.loads(proc.stdout[proc.stdout.index("{"):])
    _, result, _ = plait_run(FLOW)
    assert printed == {"report": result["output"]["report"]}


def test_an_empty_catalogue_maps_over_nothing(plait_run, tmp_path):
    catalogue = tmp_path / "none.json"
    catalogue.write_text(json.dumps({"stations": []}))
    code, result, _ = plait_run(FLOW, {"catalogue": str(catalogue)})
    assert code == 0
    assert result["steps"]["collect"]["output"] == []
    assert result["output"]["report"]["stations"] == 0


def test_a_bad_record_fails_the_map_naming_its_item(plait_run, tmp_path):
    catalogue = tmp_path / "bad.json"
    catalogue.write_text(json.dumps({"stations": [
        {"id": "LIS", "city": "Lisbon", "elevation_m": 77},
        {"id": "XXX", "city": "Nowhere"}]}))  # no elevation: a KeyError, not retried
    code, result, _ = plait_run(FLOW, {"catalogue": str(catalogue)})
    assert code == 1
    steps = result["steps"]
    assert steps["collect[0]"]["status"] == "completed"
    assert (steps["collect[1]"]["status"], steps["collect[1]"]["attempts"]) == ("failed", 1)
    assert steps["collect"]["error"].startswith("item 'collect[1]' failed: KeyError")
    assert steps["report"]["status"] == "upstream_failed"
