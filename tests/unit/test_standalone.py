"""The product stands alone: its code, its docs and its README explain themselves in
their own words and never send the reader to an internal document they cannot read.
The word checked is ``SPEC`` (upper case, a whole word), the name such references used.

Files generated from the package (``*.egg-info``, caches) and binary files (images) are
not read.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORD = re.compile(r"\bSPEC\b")
SKIPPED_DIRS = {"__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".venv",
                "node_modules"}

def _checked_files() -> list[Path]:
    files = [ROOT / "README.md"]
    for top in ("src", "docs", "benchmarks", "tests", "examples"):
        for path in sorted((ROOT / top).rglob("*")):
            parts = set(path.relative_to(ROOT).parts)
            if (path.is_file() and not parts & SKIPPED_DIRS and path != Path(__file__).resolve()
                    and not any(p.endswith(".egg-info") for p in parts)):
                files.append(path)
    return files


def _mentions(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line: text`` for each line of ``path`` that names the word."""
    data = path.read_bytes()
    if b"\0" in data:
        return []
    rel = path.relative_to(root).as_posix()
    return [f"{rel}:{n}: {line.strip()}"
            for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1)
            if WORD.search(line)]


def test_the_scan_finds_a_mention(tmp_path: Path) -> None:
    """The scanner itself: a mention is reported with its file and line."""
    (tmp_path / "x.md").write_text("fine\n  see SPEC 5 here\nSPECIFIC, spec: fine\n")
    (tmp_path / "x.png").write_bytes(b"\x89PNG\0 SPEC")
    assert _mentions(tmp_path / "x.md", tmp_path) == ["x.md:2: see SPEC 5 here"]
    assert _mentions(tmp_path / "x.png", tmp_path) == []


def test_every_file_stands_alone() -> None:
    found = [m for f in _checked_files() for m in _mentions(f)]
    assert not found, "internal references left:\n" + "\n".join(found)
