"""Step types from installed packages (entry point group ``plait.step_types``)
are loaded before a definition is validated; one that fails to load is named."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from plait import DefinitionError, Workflow
from plait.core import steptypes
from plait.steps import registry


@pytest.fixture
def installed(step_type_plugin: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The plugin distribution on sys.path, in a process whose plugins are not loaded
    yet; the registries are restored afterwards."""
    monkeypatch.syspath_prepend(str(step_type_plugin))
    monkeypatch.setattr(registry, "_plugins_loaded", False)
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(steptypes, "_TYPES", dict(steptypes._TYPES))
    monkeypatch.setattr(steptypes, "_UNAVAILABLE", {})
    yield


def shout_flow(step_type: str = "shout") -> dict[str, object]:
    return {"name": "plugin-flow", "steps": [
        {"id": "loud", "type": step_type, "text": "{{ input.word }}"}]}


def test_a_plugin_type_validates_and_runs_from_a_definition(installed: None) -> None:
    result = Workflow.from_dict(shout_flow()).run({"word": "hi"})
    assert result.status == "completed"
    assert result.steps["loud"].output == {"shout": "HI"}


def test_a_plugin_type_is_known_to_add_step(installed: None) -> None:
    wf = Workflow("plugin-python")
    wf.add_step("loud", type="shout", text="{{ input.word }}")
    with pytest.raises(DefinitionError) as info:
        wf.add_step("quiet", type="shout", txet="x")
    assert "did you mean 'text'?" in str(info.value.problems[0])
    assert wf.run({"word": "yo"}).steps["loud"].output == {"shout": "YO"}


def test_a_plugin_that_fails_to_load_is_named_with_its_exception(installed: None) -> None:
    with pytest.raises(DefinitionError) as info:
        Workflow.from_dict(shout_flow("broken"))
    assert [str(p) for p in info.value.problems] == [
        "steps[0].type: unknown step type 'broken': entry point 'broken' "
        "(plaitdemo_broken:TYPE) of group 'plait.step_types' failed to load: "
        "RuntimeError: plaitdemo_broken needs PLAITDEMO_TOKEN (fix or reinstall the "
        "package that provides it)"]
    with pytest.raises(DefinitionError) as info:  # a misspelt type hears of it too
        Workflow.from_dict(shout_flow("shoutt"))
    [problem] = info.value.problems
    assert problem.hint is not None
    assert problem.hint.startswith("did you mean 'shout'?; plugins that failed to load: "
                                   "entry point 'broken'")
