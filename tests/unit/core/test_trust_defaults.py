"""The rules for untrusted definitions reach ``defaults.TYPE`` (judged as a step of
that type) and ignore ``x-`` keys, which are not used."""

from __future__ import annotations

from plait.core.trust import TrustPolicy, untrusted_problems
from plait.errors import Problem


def _refused(url: str, where: str) -> Problem | None:
    return Problem(location=where, message="refused host") if "127.0.0.1" in url else None


def test_the_defaults_of_a_type_are_judged_like_a_step_of_that_type() -> None:
    data = {"name": "w", "defaults": {
        "llm": {"api_key_env": "PLAIT_API_TOKEN", "base_url": "http://127.0.0.1:1/v1",
                "prompt": "{{ secrets.OK }}"},
        "python": {"call": "os:system"},
        "timeout": "5m"}, "steps": []}
    found = {p.location for p in untrusted_problems(data, TrustPolicy(
        allowed_secrets=("OK",)), url_check=_refused)}
    assert found == {"defaults.llm.api_key_env", "defaults.llm.base_url",
                     "defaults.python.call"}


def test_a_secret_in_an_x_key_is_not_judged_where_it_is_not_used() -> None:
    data = {"name": "w", "x-llm": {"prompt": "{{ secrets.OK }}"},
            "steps": [{"id": "a", "type": "transform", "value": 1,
                       "x-note": "{{ secrets.OK }}"}]}
    assert untrusted_problems(data, TrustPolicy(allowed_secrets=("OK",))) == []


def test_a_definition_template_may_not_read_a_secret_into_the_graph_it_writes() -> None:
    """A `definition:` written at run time is a template of the step, not a place of
    its own: a secret read there would be written into a stored definition."""
    data = {"name": "w", "steps": [
        {"id": "a", "type": "workflow", "definition": "{{ {'k': secrets.OK} }}"}]}
    [problem] = untrusted_problems(data, TrustPolicy(allowed_secrets=("OK",)))
    assert problem.location == "steps[0].definition"
    assert "only in fields that leave the process" in problem.message
