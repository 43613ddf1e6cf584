"""`plait runs` and `plait show` on a database they cannot write."""

from __future__ import annotations

import json

FLOW = """
    name: ro
    steps:
      - {id: one, type: transform, value: 1}
"""


def test_runs_and_show_read_a_database_they_cannot_write(plait, write, tmp_path):
    write("ro.yaml", FLOW)
    db = {"PLAIT_DB": f"sqlite:///{tmp_path / 'store' / 'runs.db'}"}
    ran = plait("run", "ro.yaml", "--json", env=db)
    assert ran.returncode == 0, ran.stderr
    run_id = json.loads(ran.stdout)["run_id"]
    path = tmp_path / "store" / "runs.db"
    before = path.read_bytes()
    # No -wal can be made next to the file (a directory stands in the way, which
    # stops root as well); the file and directory lose write permission too.
    (tmp_path / "store" / "runs.db-wal").mkdir()
    path.chmod(0o444)
    path.parent.chmod(0o555)
    try:
        runs = plait("runs", "--json", env=db)
        shown = plait("show", run_id, "--json", env=db)
        table = plait("show", run_id, env=db)
    finally:
        path.parent.chmod(0o755)
        path.chmod(0o644)
    assert runs.returncode == 0, runs.stderr
    assert [r["run_id"] for r in json.loads(runs.stdout)["runs"]] == [run_id]
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["steps"]["one"]["status"] == "completed"
    assert table.returncode == 0 and "one" in table.stdout, table.stderr
    assert path.read_bytes() == before
