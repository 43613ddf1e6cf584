"""Copy the generated benchmark tables into README.md, between the markers
``<!-- bench:start -->`` and ``<!-- bench:end -->``.  Nothing is retyped: the tables come
from benchmarks/RESULTS.md and benchmarks/peers/RESULTS.md as the scripts wrote them,
benchmarks/CLUSTER.md (``make bench-cluster``) between ``<!-- cluster:start -->`` and
``<!-- cluster:end -->``, and benchmarks/SERVER.md (``make bench-server``) between
``<!-- server:start -->`` and ``<!-- server:end -->``, and benchmarks/JOURNAL.md and benchmarks/AGENTS.md (``make
bench-agents``) between ``<!-- journal:start -->`` / ``<!-- journal:end -->`` and
``<!-- agents:start -->`` / ``<!-- agents:end -->``, and benchmarks/PLANS.md and
benchmarks/STREAM.md (``make bench-plans``) between ``<!-- plans:... -->`` and
``<!-- stream:... -->``, and benchmarks/MONTHS.md and DISK.md (``make bench-months``) between
``<!-- months:... -->`` and ``<!-- disk:... -->``; benchmarks/STEPCOST.md (``make
bench-cost``) goes into docs/design/scale.md between ``<!-- stepcost:... -->``.

    python benchmarks/quote_readme.py
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
README = HERE.parent / "README.md"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"
CLUSTER_START, CLUSTER_END = "<!-- cluster:start -->", "<!-- cluster:end -->"
SERVER_START, SERVER_END = "<!-- server:start -->", "<!-- server:end -->"
JOURNAL_START, JOURNAL_END = "<!-- journal:start -->", "<!-- journal:end -->"
AGENTS_START, AGENTS_END = "<!-- agents:start -->", "<!-- agents:end -->"
PLANS_START, PLANS_END = "<!-- plans:start -->", "<!-- plans:end -->"
STREAM_START, STREAM_END = "<!-- stream:start -->", "<!-- stream:end -->"
# the running-for-months reports (``make bench-months``, ``make bench-cost``), each
# between ``<!-- NAME:start -->`` and ``<!-- NAME:end -->``
MONTHS_REPORTS = (("MONTHS.md", "months"), ("DISK.md", "disk"))
PEER_SECTIONS = ("chain-1000", "fanout-1-1000-1", "random-500-in-10-layers",
                 "unbalanced-sleeps", "parallel-200-sleeps")


def section(text: str, title: str) -> str:
    """The body of ``## title`` up to the next ``## ``."""
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0].strip()


def own_section(own: str) -> str:
    """The targets table and the list of missed targets (reports before issue 10 had
    only a table, titled "Targets (memory store unless a store is named)")."""
    if "## Targets\n" not in own:
        return section(own, "Targets (memory store unless a store is named)")
    return "\n\n".join([section(own, "Targets"), "Missed targets:",
                        section(own, "Missed targets")])


def header(text: str, key: str) -> str:
    for line in text.splitlines():
        if line.startswith(f"- {key}"):
            return line.split(": ", 1)[1]
    return "?"


def rows(table: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in table.splitlines():
        if line.startswith("| ") and not line.startswith(("| engine", "|---")):
            cells = [c.strip() for c in line.strip("|").split("|")]
            out[cells[0]] = cells
    return out


def peers_summary(peers: str) -> str:
    tables = {s: rows(section(peers, s)) for s in PEER_SECTIONS}
    lines = ["| engine | chain-1000 (µs/step) | fan-out 1→1000→1 (µs/step) | random-500 "
             "(µs/step) | unbalanced sleeps (makespan / critical path) | 200 parallel "
             "sleeps (makespan / critical path) |", "|---|---|---|---|---|---|"]
    for engine in tables[PEER_SECTIONS[0]]:
        cells = [engine]
        for name in PEER_SECTIONS:
            row = tables[name].get(engine, [])
            column = 3 if name in PEER_SECTIONS[:3] else 4
            cells.append(row[column] if len(row) > column else "—")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def quoted() -> str:
    own = (HERE / "RESULTS.md").read_text()
    peers = (HERE / "peers" / "RESULTS.md").read_text()
    own_targets = own_section(own)
    return "\n".join([
        START,
        f"`benchmarks/RESULTS.md` ({header(own, 'date')}; {header(own, 'machine')}; "
        f"Python {header(own, 'Python').split(' ')[0]}; load average "
        f"{header(own, 'load average when this report was written (1, 5, 15 min)')}):",
        "", own_targets, "",
        f"`benchmarks/peers/RESULTS.md` ({header(peers, 'date')}): per-step cost on the "
        f"per-step workloads, makespan over the critical path on sleep workloads (the report also "
        f"has graph build times, peak memory and the 100,000-step chain):",
        "", peers_summary(peers), "", section(peers, "Targets"), END])


def quote_report(text: str, report: Path, start: str, end: str) -> str:
    """``text`` with the header lines and tables of ``report`` (from its first ``- ``
    line on) between ``start`` and ``end``, when both are there and the report exists."""
    if not report.exists() or start not in text or end not in text:
        return text
    body = report.read_text().split("\n- ", 1)[1]  # from the first header line on
    block = "\n".join([start, f"`benchmarks/{report.name}`:", "", "- " + body.strip(), end])
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
    return pattern.sub(lambda _: block, text, count=1)


def main() -> int:
    text = README.read_text()
    if START not in text or END not in text:
        print(f"README.md has no {START} ... {END} markers", file=sys.stderr)
        return 1
    pattern = re.compile(re.escape(START) + ".*?" + re.escape(END), re.S)
    text = pattern.sub(lambda _: quoted(), text, count=1)
    for name, start, end in (("CLUSTER.md", CLUSTER_START, CLUSTER_END),
                             ("SERVER.md", SERVER_START, SERVER_END),
                             ("JOURNAL.md", JOURNAL_START, JOURNAL_END),
                             ("AGENTS.md", AGENTS_START, AGENTS_END),
                             ("PLANS.md", PLANS_START, PLANS_END),
                             ("STREAM.md", STREAM_START, STREAM_END),
                             *((name, f"<!-- {key}:start -->", f"<!-- {key}:end -->")
                               for name, key in MONTHS_REPORTS)):
        text = quote_report(text, HERE / name, start, end)
    README.write_text(text)
    design = HERE.parent / "docs" / "design" / "scale.md"  # quotes the step's cost too
    if design.exists():
        design.write_text(quote_report(design.read_text(), HERE / "STEPCOST.md",
                                       "<!-- stepcost:start -->", "<!-- stepcost:end -->"))
    print("README.md: benchmark tables updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
