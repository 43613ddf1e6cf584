"""The publish step of the agent pipeline (called by flow.yaml after the approval).

Writes the approved report as a Markdown file, with a front matter naming who approved
it and how many critique rounds it took, and returns where it went.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def publish(topic: str, report: str, rounds: int, approval: dict[str, Any],
            path: str) -> dict[str, Any]:
    if not approval.get("approved"):
        raise ValueError("refusing to publish a report that was not approved")
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    note = (approval.get("data") or {}).get("note") if isinstance(approval.get("data"),
                                                                  dict) else None
    lines = ["---", f"topic: {topic}", f"critique_rounds: {rounds}",
             f"approved_by: {approval.get('by')}", f"approved_at: {approval.get('at')}"]
    if note:
        lines.append(f"note: {note}")
    text = "\n".join([*lines, "---", "", report.strip(), ""])
    target.write_text(text, encoding="utf-8")
    return {"path": str(target), "bytes": len(text.encode()), "approved_by": approval.get("by")}
