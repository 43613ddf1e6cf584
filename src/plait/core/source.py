"""Parsing definition text (YAML or JSON) safely: duplicate keys are errors, YAML alias
expansion is bounded, nothing but plain data is constructed."""

from __future__ import annotations

import json
from typing import Any, cast

import yaml

from ..errors import DefinitionError, Problem
from .jsoncheck import MAX_NESTING, find_problems

MAX_EXPANDED_NODES = 1_000_000


class _TooDeep(yaml.YAMLError):
    """Flow collections (``[`` / ``{``) nested past MAX_NESTING levels."""


class _TooLarge(yaml.YAMLError):
    """Merge keys copying more than MAX_EXPANDED_NODES pairs (chains of mappings each
    merging the one before grow quadratically)."""


_MERGE_TAG = "tag:yaml.org,2002:merge"
_VALUE_TAG = "tag:yaml.org,2002:value"
_STR_TAG = "tag:yaml.org,2002:str"


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys, and flow collections nested past
    MAX_NESTING levels as soon as it meets them: PyYAML's scanner takes time quadratic
    in their depth (seconds for a thousand ``[``).

    Merge keys (``<<: *base``, ``<<: [*a, *b]``) follow YAML's merge semantics: the
    mapping's own keys win over merged ones, and of several merged mappings the first
    listed wins; only a key written twice in one mapping is a duplicate."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        # each mapping flattened: how many of its pairs are its own (they come last,
        # after the pairs its `<<` key merged)
        self.own_pairs: dict[yaml.MappingNode, int] = {}
        self.merged_pairs = 0  # pairs copied by merge keys, bounded

    def fetch_flow_collection_start(self, TokenClass: Any) -> None:  # noqa: N803 (PyYAML's name)
        if self.flow_level >= MAX_NESTING:
            raise _TooDeep()
        super().fetch_flow_collection_start(TokenClass)

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        """Replace a ``<<`` key by the pairs it merges, placed before the mapping's own
        (construction keeps the last of equal keys); the merged mappings' pairs in
        reverse order, so that the first listed wins.  (PyYAML's own flattening, since
        6.0.2, keeps the first of equal keys only when they are the same string object:
        interned short keys, not long ones.)"""
        if node in self.own_pairs:  # done already (an anchored mapping merged again)
            return
        if not any(k.tag in (_MERGE_TAG, _VALUE_TAG) for k, _ in node.value):
            self.own_pairs[node] = len(node.value)  # the common case
            return
        own: list[tuple[yaml.Node, yaml.Node]] = []
        sources: list[yaml.MappingNode] = []
        merge_at: yaml.Mark | None = None
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                if merge_at is not None:
                    _duplicate("<<", key_node.start_mark, merge_at)
                merge_at = key_node.start_mark
                sources = _merge_sources(node, value_node)
                continue
            if key_node.tag == _VALUE_TAG:  # a `=` key: text, as PyYAML reads it
                key_node.tag = _STR_TAG
            own.append((key_node, value_node))
        merged: list[tuple[yaml.Node, yaml.Node]] = []
        for source in reversed(sources):
            self.construct_object(source)  # its own duplicate keys are refused
            merged += source.value
        self.merged_pairs += len(merged)
        if self.merged_pairs > MAX_EXPANDED_NODES:
            raise _TooLarge()
        node.value = merged + own
        self.own_pairs[node] = len(own)


def _merge_sources(node: yaml.MappingNode, value: yaml.Node) -> list[yaml.MappingNode]:
    """The mappings a ``<<`` key merges (one, or a list of them)."""
    found: list[yaml.Node] = value.value if isinstance(value, yaml.SequenceNode) \
        else [value]
    for source in found:
        if not isinstance(source, yaml.MappingNode):
            kind = "scalar" if isinstance(source, yaml.ScalarNode) else "list"
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark,
                f"`<<` merges a mapping or a list of mappings, not a {kind}",
                source.start_mark)
    return cast(list[yaml.MappingNode], found)


def _duplicate(key: object, mark: yaml.Mark, first: yaml.Mark) -> None:
    # the whole message, locations included, and no mark: `_yaml_msg` would add the
    # mark's location a second time
    raise yaml.constructor.ConstructorError(
        None, None, f"duplicate key {key!r} at {_at(mark)} (first at {_at(first)})", None)


def _key(loader: _StrictLoader, key_node: yaml.Node, deep: bool) -> object:
    key = loader.construct_object(key_node, deep=deep)
    if isinstance(key, bool) and isinstance(key_node, yaml.ScalarNode) \
            and not key_node.style:  # plain: None (Python parser) or "" (libyaml)
        # YAML 1.1 reads a plain `on:` / `yes:` key as a boolean; plait's keys are
        # strings (a `notify:` target's `on:`, as in GitHub Actions): keep the text
        return key_node.value
    if isinstance(key, dict | list):  # a YAML complex key (`? [a]: b`)
        mark = key_node.start_mark
        raise yaml.constructor.ConstructorError(
            None, None, f"a key must be a string, not a {type(key).__name__} (line "
            f"{mark.line + 1}, column {mark.column + 1})", mark)
    return key


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode,
                       deep: bool = False) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    pairs = node.value
    merged = len(pairs) - loader.own_pairs[node]
    out: dict[Any, Any] = {}
    first: dict[Any, yaml.Mark] = {}
    for n, (key_node, value_node) in enumerate(pairs):
        key = _key(loader, key_node, deep)
        if n >= merged:  # written in this mapping (merged pairs come first, and yield)
            if key in first:
                _duplicate(key, key_node.start_mark, first[key])
            first[key] = key_node.start_mark
        out[key] = loader.construct_object(value_node, deep=deep)
    return out


def _at(mark: yaml.Mark) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}"


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                              _construct_mapping)


class _FastStrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """``_StrictLoader``'s rules on libyaml's scanner and parser (six times faster on a
    10,000-step definition).  Only the success path uses it: a document it refuses,
    or one nested deeper than MAX_NESTING, is read again by ``_StrictLoader``, whose
    errors are the ones plait reports."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.own_pairs: dict[yaml.MappingNode, int] = {}
        self.merged_pairs = 0

    flatten_mapping = _StrictLoader.flatten_mapping


_FastStrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                                  _construct_mapping)


def _depth_within(data: object, limit: int) -> bool:
    """Whether lists and mappings in ``data`` nest at most ``limit`` levels."""
    stack: list[tuple[object, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            value = list(value.values())
        if isinstance(value, list):
            if depth >= limit:
                return False
            stack.extend((item, depth + 1) for item in value
                         if isinstance(item, dict | list))
    return True


def _yaml(text: str) -> object:
    if yaml.__with_libyaml__:
        try:
            data = yaml.load(text, Loader=_FastStrictLoader)  # noqa: S506 - safe loader subclass
        except (yaml.YAMLError, RecursionError):
            pass  # read again below, for the error plait reports
        else:  # (too many values once aliases expand: refused by the caller)
            if _expanded_size(data) > MAX_EXPANDED_NODES or _depth_within(data, MAX_NESTING):
                return data
    return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - safe loader subclass


def parse_text(text: str, *, source: str, fmt: str | None = None) -> object:
    """The data in ``text``; DefinitionError naming ``source`` and the line otherwise.
    ``fmt`` is 'json' or 'yaml' (guessed from ``source`` when None; YAML reads JSON)."""
    kind = fmt or ("json" if source.endswith(".json") else "yaml")
    try:
        data = _json(text) if kind == "json" else _yaml(text)
    except (_TooDeep, RecursionError):  # both parsers recurse once or more per level
        raise DefinitionError([Problem(location="", message=(
            f"the definition nests lists and mappings too deeply to read (at most "
            f"{MAX_NESTING} levels are accepted)"))], source=source) from None
    except _TooLarge:
        raise _too_large(source) from None
    except yaml.YAMLError as exc:
        raise DefinitionError([Problem(location="", message=f"YAML error: {_yaml_msg(exc)}")],
                              source=source) from exc
    except ValueError as exc:
        raise DefinitionError([Problem(location="", message=f"JSON error: {exc}")],
                              source=source) from exc
    if _expanded_size(data) > MAX_EXPANDED_NODES:
        raise _too_large(source)
    return data


def _too_large(source: str) -> DefinitionError:
    return DefinitionError([Problem(location="", message=(
        f"the definition expands to over {MAX_EXPANDED_NODES} values (YAML aliases "
        f"repeated too often)"))], source=source)


def _json(text: str) -> object:
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise ValueError(f"duplicate key {key!r}")
            out[key] = value
        return out
    return json.loads(text, object_pairs_hook=pairs)


def _yaml_msg(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is not None:
        return f"{problem} ({_at(mark)})"
    return str(problem)


def _expanded_size(data: object) -> int:
    """Values in ``data`` counting every alias expansion; shared nodes are measured once
    (iteratively, so deep documents cannot exhaust the stack)."""
    sizes: dict[int, int] = {}
    visiting: set[int] = set()
    stack: list[tuple[object, bool]] = [(data, False)]
    while stack:
        node, expanded = stack.pop()
        if not isinstance(node, dict | list):
            continue
        key = id(node)
        if key in sizes:
            continue
        kids = list(node.values()) if isinstance(node, dict) else node
        if not expanded:
            if key in visiting:  # a recursive alias: infinite when expanded
                return MAX_EXPANDED_NODES + 1
            visiting.add(key)
            stack.append((node, True))
            stack.extend((k, False) for k in kids if isinstance(k, dict | list))
            continue
        total = 1 + sum(sizes.get(id(k), 1) for k in kids)
        sizes[key] = min(total, MAX_EXPANDED_NODES + 1)
    return sizes.get(id(data), 1)


def check_data(data: object, *, source: str | None) -> None:
    """DefinitionError listing where ``data`` is not JSON: what the loader, the
    fingerprint and every store need (no lone surrogate, no key that is not a string,
    no date or set from YAML, no NaN, no integer past 4,300 digits, at most
    MAX_NESTING levels), checked before anything reads the definition."""
    found = find_problems(data)
    if found:
        raise DefinitionError([Problem(location=p.short_path.lstrip("."),
                                       message=f"value {p.problem}", hint=_hint(p.problem))
                               for p in found], source=source)


def _hint(problem: str) -> str | None:
    if "is a date" in problem or "is a datetime" in problem:
        return "YAML reads an unquoted date as a date: quote it"
    return None
