"""`plait validate` on definitions with schedules and a concurrency key: a valid file
shows each schedule's next fire; an invalid one lists every problem with its field."""

from __future__ import annotations

import re

VALID = """
    name: nightly-report
    input: {type: object, required: [customer]}
    concurrency_key: "{{ input.customer }}"
    max_runs_per_key: 2
    schedules:
      - {cron: "*/5 * * * *", input: {customer: acme}}
      - {cron: "30 2 * * *", timezone: Europe/Paris, catch_up: all, input: {customer: b}}
    steps:
      - {id: report, type: transform, value: "{{ input.customer }}"}
"""

INVALID = """
    name: nightly-report
    input: {type: object, required: [customer]}
    concurrency_key: "{{ steps.report.output }}"
    schedules:
      - {cron: "*/5 * * *", input: {customer: acme}}
      - {cron: "0 3 * * *", timezone: Europe/Pari, catchup: all}
    steps:
      - {id: report, type: transform, value: 1}
"""


def test_a_valid_file_shows_its_schedules_and_key(plait, write):
    write("flow.yaml", VALID)
    proc = plait("validate", "flow.yaml")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("flow.yaml: valid (workflow 'nightly-report'")
    assert re.fullmatch(r"  schedule '\*/5 \* \* \* \*' \(UTC, catch_up skip\): next fire "
                        r"\d{4}-\d\d-\d\d \d\d:\d[05]:00 UTC", lines[1])
    assert re.fullmatch(r"  schedule '30 2 \* \* \*' \(Europe/Paris, catch_up all\): next "
                        r"fire \d{4}-\d\d-\d\d 0[01]:30:00 UTC", lines[2])
    assert lines[3] == ("  concurrency key '{{ input.customer }}': at most 2 running "
                        "run(s) per key")


def test_every_schedule_problem_is_listed_with_its_field(plait, write):
    write("bad.yaml", INVALID)
    proc = plait("validate", "bad.yaml")
    assert proc.returncode == 1
    err = proc.stderr
    assert "bad.yaml: invalid workflow definition (5 problems)" in err
    for expected in [
        "concurrency_key: the template reads 'steps'; a concurrency key may read only "
        "`input`",
        "schedules[0].cron: a cron expression has 5 fields",
        "schedules[1].catchup: unknown field for a schedule (did you mean 'catch_up'?)",
        "schedules[1].timezone: unknown time zone 'Europe/Pari' (did you mean "
        "'Europe/Paris'?)",
        "schedules[1].input: the schedule's input does not match the workflow's input "
        "schema: 'customer' is a required property",
    ]:
        assert expected in err, err
