"""No two modules of plait define a public class or function of the same name for
different things: a reader (or an import) never has to ask which ``Outcome`` is meant.

Only module-level definitions count (methods, ``_private`` names and the re-exports of
``__init__`` modules do not); the names below are the deliberate exceptions."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import plait

ROOT = Path(plait.__file__).parent

_CLAIMS = "one operation of the worker claims for each SQL backend"
_CACHE = "one operation of the step cache / webhook deliveries for each SQL backend"
_JOURNAL = "one operation of the step journal (or a run's events) for each SQL backend"
_SCHEMA = "one step of opening a schema for each SQL backend"
_SURFACE = "the CLI command (or HTTP route) of the public operation of that name"

# name -> (the modules defining it, why it is the same thing in each)
ALLOWED: dict[str, tuple[frozenset[str], str]] = {
    **{name: (frozenset({"store/postgres_claims.py", "store/sqlite_claims.py"}), _CLAIMS)
       for name in ("claim_attempts", "complete_attempts", "extend_leases", "reap_expired",
                    "runs_to_drive", "get_breaker", "put_breaker")},
    **{name: (frozenset({"store/postgres_cache.py", "store/sqlite_cache.py"}), _CACHE)
       for name in ("get_cached", "put_cached", "claim_delivery", "forget_delivery")},
    **{name: (frozenset({"store/postgres_journal.py", "store/sqlite_journal.py"}), _JOURNAL)
       for name in ("journal", "journal_get", "journal_step", "journal_put", "event_get",
                    "event_put")},
    **{name: (frozenset({"store/postgres_tokens.py", "store/sqlite_tokens.py"}),
              "one operation of a run's token count for each SQL backend")
       for name in ("tokens_add", "tokens_get")},
    **{name: (frozenset({"store/sql/postgres_schema.py", "store/sql/sqlite_schema.py"}),
              _SCHEMA)
       for name in ("latest_version", "migrate", "schema_version")},
    "translate": (frozenset({"store/postgres_database.py", "store/sqlite_database.py"}),
                  "a driver error as a plait error, for each SQL backend"),
    "parse_url": (frozenset({"store/postgres_url.py", "store/sqlite_url.py"}),
                  "a store URL split into its parts, for each SQL backend"),
    "optional_text": (frozenset({"store/sql/postgres_rows.py", "store/sql/rows.py"}),
                      "a text as each SQL backend can store it"),
    "ChildRuns": (frozenset({"runtime/children.py", "steps/subworkflow.py"}),
                  "the steps' protocol of runtime.children.ChildRuns (no import cycle)"),
    "untrusted_problems": (frozenset({"core/trust.py", "server/untrusted.py"}),
                           "the server's call of core.trust.untrusted_problems"),
    "runnable_definition": (frozenset({"cli/session.py", "runtime/control.py"}),
                            "the same lookup, with the CLI's import paths and refusal"),
    "approve": (frozenset({"cli/main.py", "runs.py"}), _SURFACE),
    "resume": (frozenset({"cli/main.py", "runs.py"}), _SURFACE),
    "signal": (frozenset({"cli/main.py", "runs.py"}), _SURFACE),
    "get_run": (frozenset({"runs.py", "server/routes/runs.py"}), _SURFACE),
    "schema": (frozenset({"cli/main.py", "server/routes/meta.py"}),
               "`plait schema` and GET /api/schema: the same definition schema"),
}


def defined_names() -> dict[str, set[str]]:
    """Each public module-level class or function name -> the modules defining it."""
    found: dict[str, set[str]] = defaultdict(set)
    for path in sorted(ROOT.rglob("*.py")):
        if path.name == "__init__.py":
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if (isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                    and not node.name.startswith("_")):
                found[node.name].add(path.relative_to(ROOT).as_posix())
    return found


def test_no_name_is_defined_twice_for_different_things() -> None:
    clashes = {name: sorted(where) for name, where in defined_names().items()
               if len(where) > 1 and (name not in ALLOWED or ALLOWED[name][0] != where)}
    assert not clashes, f"names defined in more than one module: {clashes}"


def test_every_allowed_name_is_still_defined_where_it_says() -> None:
    found = defined_names()
    stale = sorted(name for name, (where, _) in ALLOWED.items() if found.get(name) != where)
    assert not stale, f"allowed duplicates that no longer are: {stale}"


def test_the_scan_finds_module_level_definitions_only() -> None:
    found = defined_names()
    assert found["Outcome"] == {"runtime/worksource.py"}
    assert found["InboxOutcome"] == {"store/records.py"}
    assert "from_json" not in found  # a method of ErrorInfo
