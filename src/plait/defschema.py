"""The JSON Schema of the definition format (``plait schema``, ``GET /api/schema``).

It is generated from what the loader accepts: the field tables of ``core.loader``
(``TOP_FIELDS``, ``STEP_FIELDS``, ``DEFAULTABLE``, ``RETRY_FIELDS``), the schedule fields
of ``core.schedule_check`` and the step type registry (``core.steptypes``: each type's
fields and required fields).  A field added to one of them appears here, and a test
checks that every table field is described, so the schema cannot drift from the loader.

The schema is what an editor needs to complete and flag a workflow file (YAML language
server, VS Code): unknown fields, missing ids and types, wrong shapes.  It is looser
than ``plait validate`` where only the validator can judge (templates, the graph,
durations' units); a file the schema accepts may still be refused by ``validate``, never
the other way round for the shapes it describes.
"""

from __future__ import annotations

from .core.loader import DEFAULTABLE, RETRY_FIELDS, STEP_FIELDS, TOP_FIELDS
from .core.model import CATCH_UP, JSON, REDUCERS, TRIGGERS, JSONDict
from .core.schedule_check import SCHEDULE_FIELDS
from .core.steptypes import known_types, type_info
from .steps.builtin import register_builtins
from .steps.registry import load_plugins

SCHEMA_ID = "https://plait.dev/schema/workflow.json"
_DURATION: JSONDict = {"type": ["number", "string"],
                       "description": "seconds, or a duration such as 500ms, 30s, 5m, 1h"}
_NAMES: JSONDict = {"type": "array", "items": {"type": "string"}}
_TEMPLATE: JSONDict = {"type": ["string", "boolean"],
                       "description": "a template such as {{ steps.a.output.ok }}"}
_ANY: JSONDict = {}
_COUNT: JSONDict = {"type": "integer", "minimum": 1}
# `x-` keys are accepted, and ignored, wherever the loader checks field names
_EXTENSIONS: JSONDict = {"^x-": {"description": "an extension key, ignored by plait (a "
                                               "place for YAML anchors and notes)"}}

_RETRY: JSONDict = {
    "description": "how failed attempts are retried: a mapping, or the number of retries",
    "oneOf": [
        {"type": "integer", "minimum": 0},
        {"type": "object", "additionalProperties": False, "patternProperties": _EXTENSIONS,
         "properties": {
            "max_retries": {"type": "integer", "minimum": 0},
            "initial_delay": _DURATION, "backoff": {"type": "number", "minimum": 1},
            "max_delay": _DURATION, "jitter": {"type": "number", "minimum": 0},
            "retry_on": _NAMES, "no_retry_on": _NAMES}},
    ]}
_FALLBACK: JSONDict = {
    "description": "what a step does once its retries are spent",
    "oneOf": [
        {"type": "object", "additionalProperties": False, "required": ["call"],
         "properties": {"call": {"type": "string", "pattern": "^[^:]+:.+$"}}},
        {"type": "object", "additionalProperties": False, "required": ["output"],
         "properties": {"output": _ANY}},
    ]}
_BREAKER: JSONDict = {"type": "object", "additionalProperties": False, "required": ["key"],
                      "patternProperties": _EXTENSIONS,
                      "properties": {"key": {"type": "string"},
                                     "failure_threshold": _COUNT,
                                     "reset_after": _DURATION}}

_CACHE: JSONDict = {"type": "object", "additionalProperties": False,
                    "required": ["key", "ttl"], "patternProperties": _EXTENSIONS,
                    "description": "reuse a completed result of the same workflow, step "
                                   "and rendered key younger than ttl",
                    "properties": {"key": {"type": "string"}, "ttl": _DURATION}}

STEP_FIELD_SCHEMAS: dict[str, JSONDict] = {
    "id": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]{0,63}$"},
    "type": {"type": "string"},
    "depends_on": _NAMES,
    "when": _TEMPLATE,
    "trigger": {"enum": list(TRIGGERS)},
    "retry": _RETRY,
    "timeout": {"anyOf": [_DURATION, {"type": "null"}]},
    "fallback": _FALLBACK,
    "allow_failure": {"type": "boolean"},
    "outputs": _NAMES,
    "circuit_breaker": _BREAKER,
    "pool": {"type": "string"},
    "description": {"type": "string"},
    "cache": _CACHE,
}

# What is known of the fields of the built-in types; any other field is "any JSON".
TYPE_FIELD_SCHEMAS: dict[str, JSONDict] = {
    "call": {"type": "string", "pattern": "^[^:]+:.+$",
             "description": "module:function"},
    "with": {"type": "object"},
    "executor": {"enum": ["thread", "process"],
                 "description": "where a sync function runs: a worker thread (the "
                                "default) or a child process"},
    "then": _NAMES,
    "else": _NAMES,
    "duration": _DURATION,
    "url": {"type": "string"},
    "method": {"type": "string"},
    "headers": {"type": "object"},
    "params": {"type": "object"},
    "follow_redirects": {"type": "boolean"},
    "prompt": {"type": "string"},
    "base_url": {"type": "string"},
    "model": {"type": "string"},
    "api_key_env": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$",
                    "description": "the name of the environment variable holding the key"},
    "messages": {"anyOf": [{"type": "array", "items": {"type": "object"}}, _TEMPLATE]},
    "response_format": {"type": "object"},
    "tools": {"anyOf": [{"type": "array", "minItems": 1, "items": {"anyOf": [
        {"type": "object", "required": ["type", "function"],
         "properties": {"type": {"const": "function"}, "function": {
             "type": "object", "required": ["name"],
             "properties": {"name": {"type": "string"}, "description": {"type": "string"},
                            "parameters": {"anyOf": [{"type": "object"}, _TEMPLATE]}}}}},
        _TEMPLATE]}}, _TEMPLATE],
        "description": "functions the model may call: [{type: function, function: "
                       "{name, description, parameters}}]"},
}

_SCHEDULE: JSONDict = {"type": "object", "additionalProperties": False, "required": ["cron"],
                       "properties": {"cron": {"type": "string"},
                                      "timezone": {"type": "string"},
                                      "input": _ANY,
                                      "catch_up": {"enum": list(CATCH_UP)}}}

TOP_FIELD_SCHEMAS: dict[str, JSONDict] = {
    "name": {"type": "string", "pattern": "^[a-z0-9][a-z0-9_-]{0,63}$"},
    "version": {"type": "integer", "minimum": 1},
    "description": {"type": "string"},
    "input": {"type": "object", "description": "a JSON Schema for the run's input"},
    "concurrency": _COUNT,
    "on_failure": {"enum": ["continue", "fail_fast"]},
    "timeout": {"anyOf": [_DURATION, {"type": "null"}]},
    "sla": {"anyOf": [_DURATION, {"type": "null"}]},
    "defaults": {},  # filled with the step types registered (`_defaults_schema`)
    "pools": {"type": "object", "additionalProperties": {
        "type": "object", "additionalProperties": False, "patternProperties": _EXTENSIONS,
        "properties": {"concurrency": _COUNT,
                       "rate": {"type": ["string", "object"],
                                "description": "starts per period, such as 10/s"}}}},
    "output": _ANY,
    "steps": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/step"}},
    "reducers": {"type": "object", "additionalProperties": {"enum": list(REDUCERS)}},
    "limits": {"type": "object", "additionalProperties": False,
               "patternProperties": _EXTENSIONS, "properties": {
        "max_steps": _COUNT, "max_depth": _COUNT, "max_map_items": _COUNT,
        "max_subworkflow_depth": _COUNT, "max_llm_tokens": _COUNT,
        "max_output_bytes": {"type": ["integer", "string"]}}},
    "alerts": _NAMES,
    "schedules": {"type": "array", "items": _SCHEDULE},
    "concurrency_key": {"type": "string"},
    "max_runs_per_key": {"anyOf": [_COUNT, {"type": "null"}]},
    "notify": {"type": "array", "items": {
        "type": "object", "additionalProperties": False, "required": ["on"],
        "properties": {"on": {"type": "array", "minItems": 1, "items": {"enum": [
                           "run_failed", "sla_breached", "approval_waiting", "alert"]}},
                       "url": {"type": "string"},
                       "call": {"type": "string", "pattern": "^[^:]+:.+$"}},
        "oneOf": [{"required": ["url"]}, {"required": ["call"]}]}},
}


def _step_schema() -> JSONDict:
    """A step: its common fields, then per type (``if type == T``) exactly the common
    fields and T's fields (T's required ones: ``_required_fields``)."""
    types = known_types()
    cases: list[JSON] = []
    for name in types:
        info = type_info(name)
        if info is None:  # pragma: no cover - known_types lists registered types
            continue
        props: JSONDict = {key: STEP_FIELD_SCHEMAS[key] for key in STEP_FIELDS}
        for field in sorted(info.fields):
            props[field] = TYPE_FIELD_SCHEMAS.get(field, _ANY)
        cases.append({"if": {"properties": {"type": {"const": name}},
                             "required": ["type"]},
                      "then": {"properties": props, "additionalProperties": False,
                               "patternProperties": _EXTENSIONS,
                               "required": ["id", "type"]}})
    common: JSONDict = dict(STEP_FIELD_SCHEMAS)
    common["type"] = {"enum": list(types), "description": "the step's type"}
    return {"type": "object", "required": ["id", "type"], "properties": common,
            "allOf": cases}


def _required_fields() -> list[JSON]:
    """Each required field of each type: required in every step of that type unless
    ``defaults.TYPE`` gives it (rules of the whole definition, which sees both)."""
    rules: list[JSON] = []
    for name in known_types():
        info = type_info(name)
        for field in sorted(info.required if info is not None else ()):
            given: JSONDict = {"required": ["defaults"], "properties": {"defaults": {
                "required": [name], "properties": {name: {"required": [field]}}}}}
            step: JSONDict = {"if": {"properties": {"type": {"const": name}},
                                     "required": ["type"]},
                              "then": {"required": [field]}}
            rules.append({"if": {"not": given},
                          "then": {"properties": {"steps": {"items": step}}}})
    return rules


def _defaults_schema() -> JSONDict:
    """``defaults``: the fields every step has that it may set, and per registered step
    type a mapping of that type's fields (and of those fields)."""
    common: JSONDict = {k: STEP_FIELD_SCHEMAS[k] for k in DEFAULTABLE}
    props = dict(common)
    for name in known_types():
        info = type_info(name)
        if info is None or name in common:  # (a type named like a field: the field)
            continue
        fields: JSONDict = {f: TYPE_FIELD_SCHEMAS.get(f, _ANY) for f in sorted(info.fields)}
        props[name] = {"type": "object", "additionalProperties": False,
                       "patternProperties": _EXTENSIONS, "properties": fields | common,
                       "description": f"taken by every {name} step that does not set "
                                      f"the field itself"}
    return {"type": "object", "additionalProperties": False,
            "patternProperties": _EXTENSIONS, "properties": props,
            "description": "merged into every step (a step's own value wins); a step "
                           "type's name holds defaults for the steps of that type"}


def definition_schema() -> JSONDict:
    """The JSON Schema (draft 2020-12) of a workflow definition, with the step types
    registered in this process (built-ins and plugins)."""
    register_builtins()
    load_plugins()
    properties: JSONDict = {key: TOP_FIELD_SCHEMAS[key] for key in TOP_FIELDS}
    properties["defaults"] = _defaults_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "plait workflow definition",
        "type": "object",
        "required": ["name", "steps"],
        "additionalProperties": False,
        "patternProperties": _EXTENSIONS,
        "properties": properties,
        "allOf": _required_fields(),
        "$defs": {"step": _step_schema()},
    }


def described_fields() -> dict[str, tuple[str, ...]]:
    """Every field table the schema is generated from (for the test that keeps them in
    step)."""
    return {"top": TOP_FIELDS, "step": STEP_FIELDS, "defaults": DEFAULTABLE,
            "retry": RETRY_FIELDS, "schedule": SCHEDULE_FIELDS}
