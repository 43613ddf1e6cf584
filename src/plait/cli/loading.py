"""Finding the workflow a command names: a definition file, or a stored NAME[@VERSION]."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from ..errors import DefinitionError, Problem, WorkflowNotFound
from ..store.base import Store
from ..workflow import Workflow

_STORED = re.compile(r"^(?P<name>[a-z0-9][a-z0-9_-]{0,63}"
                     r"(?:\.[A-Za-z_][A-Za-z0-9_]{0,63})*)(?:@(?P<version>[0-9]+))?$")


def add_import_paths(definition: Path | None) -> None:
    """Put the definition file's directory and the current directory first on
    ``sys.path``, so ``python`` steps' ``call: module:function`` import (docs/cli.md)."""
    wanted = [str(Path.cwd())]
    if definition is not None:
        wanted.insert(0, str(definition.resolve().parent))
    for entry in reversed(wanted):
        if entry in sys.path:
            sys.path.remove(entry)
        sys.path.insert(0, entry)


_FILE_SUFFIXES = (".yaml", ".yml", ".json")


def path_exists(target: str | Path) -> bool:
    """``Path(target).exists()``, False for a name the system refuses (too long, a NUL)
    instead of an OSError."""
    try:
        return Path(target).exists()
    except (OSError, ValueError):
        return False


def stored_reference(target: str) -> tuple[str, int | None] | None:
    """``(name, version)`` when ``target`` is not an existing file and reads as
    ``NAME`` or ``NAME@VERSION``; None otherwise.  A target ending as a definition file
    does (``.yaml``, ``.yml``, ``.json``) is a file even when it is missing, so its
    error says the file cannot be read."""
    if path_exists(target) or target.lower().endswith(_FILE_SUFFIXES):
        return None
    match = _STORED.match(target)
    if match is None:
        return None
    version = match.group("version")
    return match.group("name"), int(version) if version is not None else None


def load_file(target: str, *, check_imports: bool = False) -> Workflow:
    """Load and validate a definition file (DefinitionError lists every problem; with
    ``check_imports``, also the python steps that do not import)."""
    path = Path(target)
    add_import_paths(path)
    return Workflow.load(path, check_imports=check_imports)


async def load_target(target: str, store: Store) -> Workflow:
    """A definition file, else a workflow stored under ``NAME[@VERSION]``."""
    reference = stored_reference(target)
    if reference is None:
        return load_file(target)
    name, version = reference
    try:
        record = await store.get_workflow(name, version)
    except WorkflowNotFound as exc:
        from ..store.url import shown_url

        if exc.versions:  # the workflow is stored, that version is not
            raise DefinitionError([Problem(
                location="", message=str(exc),
                hint=f"`plait run {name}` runs the latest, {name}@{exc.versions[-1]}")],
                source=target) from None
        raise DefinitionError([Problem(
            location="", message=f"no such file, and {exc}",
            hint=f"give the path of a YAML or JSON definition, or run it once so "
            f"{name!r} is stored in {shown_url(store.url)}")], source=target) from None
    add_import_paths(None)
    return Workflow.from_dict(record.definition, source=f"{record.name}@{record.version}")
