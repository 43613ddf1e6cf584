"""Checking that a value is JSON every store can hold, naming the key path of what is not.

A step's output (and a run's input) is JSON (docs/limits.md): dicts with string keys, lists,
strings that are valid Unicode (no lone surrogate, which UTF-8 cannot encode), integers
of at most 4,300 digits (Python's int <-> str conversion limit: a longer one could be
stored by one process and not read back by another), finite floats, booleans and None,
nested at most ``MAX_NESTING`` levels, and at most ``limits.max_output_bytes`` of JSON
text.  Tuples become lists; anything else is refused with the key path (``output.s``,
``output.items[3]``) and what is wrong, before the store sees it.

The walk is recursive but bounded by ``MAX_NESTING``, so no input can exhaust the
stack.  The size is bounded cheaply while walking (an upper bound of the encoded size);
only an output whose bound passes the limit is encoded to measure it exactly.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from ..errors import InputError, OutputError

if TYPE_CHECKING:
    from .model import JSON

MAX_NESTING = 256
MAX_INT_DIGITS = 4_300
_INT_BOUND = 10 ** MAX_INT_DIGITS
# an int of fewer bits has fewer than 4,300 digits (14_283 * log10(2) < 4_299.7)
_SAFE_INT_BITS = 14_283
# UTF-8 takes at most 4 bytes a character, a JSON escape (\u001f) 6
_BYTES_PER_CHAR = 6
_SURROGATE = re.compile("[\ud800-\udfff]")
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


class NotJSON(Exception):
    """Where (``path``, after the root's name) and what is wrong with a value."""

    def __init__(self, path: str, problem: str) -> None:
        self.path, self.problem = path, problem
        super().__init__(f"{path}: {problem}")

    @property
    def short_path(self) -> str:
        """The path, its middle cut when it is long (a value nested 256 levels deep)."""
        path = self.path
        return path if len(path) <= 120 else f"{path[:60]}...{path[-57:]}"

    def describe(self, root: str) -> str:
        return f"{root}{self.short_path} {self.problem}"


def ensure_json(value: object, *, step: str | None = None,
                max_bytes: int | None = None) -> JSON:
    """``value`` as JSON (tuples become lists); OutputError (never retried) naming the
    key path and the problem, or the size and ``max_bytes``, otherwise."""
    try:
        return checked_json(value, max_bytes=max_bytes)
    except NotJSON as exc:
        raise OutputError(exc.describe("output"), step=step, path=exc.path) from None


def ensure_input(value: object) -> JSON:
    """A run's input as JSON; InputError naming the key path and the problem otherwise."""
    try:
        return checked_json(value)
    except NotJSON as exc:
        raise InputError(f"the run input is not JSON: {exc.describe('input')}") from None


def checked_json(value: object, *, max_bytes: int | None = None) -> JSON:
    """``value`` as JSON; NotJSON (with the path) when it is not, or is over
    ``max_bytes`` of encoded JSON.  Plain JSON (dicts, lists and scalars only) is
    returned as it is, not copied; tuples and subclasses are converted."""
    bound = _plain_bound(value, 0)  # the common case: one quick pass, no copy, no paths
    if bound < 0:
        size = [0]
        value = _convert(value, "", 0, size)  # NotJSON with the path, or a plain copy
        bound = size[0]
    if max_bytes is not None and bound > max_bytes:
        _check_size(value, max_bytes)  # type: ignore[arg-type]
    return value  # type: ignore[return-value]


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD, so it can be stored and
    printed (error messages and tracebacks may carry them from a bad value)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def storable(value: object, *, max_bytes: int | None = None) -> tuple[JSON, str | None]:
    """``value`` as every store can hold it, and what was cleaned in it (None: nothing,
    and ``value`` is returned as given, not copied).

    For what a step leaves besides its output (log records, history notes, error
    details), where refusing would lose the record: nothing is refused.  A lone
    surrogate becomes U+FFFD; bytes become text (UTF-8, a bad byte as U+FFFD); NaN and
    the infinities become None; an integer past 4,300 digits, a key that is not a
    string, or any other object becomes a short text naming it; tuples and sets become
    lists; nesting past ``MAX_NESTING`` levels is cut; a value over ``max_bytes`` of
    JSON text becomes a text giving its size."""
    bound = _plain_bound(value, 0)  # the common case: one quick pass, no copy
    if bound >= 0 and (max_bytes is None or bound <= max_bytes):
        return value, None  # type: ignore[return-value]
    cleaned: set[str] = set()
    out = _clean(value, 0, cleaned) if bound < 0 else value
    if max_bytes is not None:
        size = len(json.dumps(out, ensure_ascii=False, separators=(",", ":"))
                   .encode("utf-8"))
        if size > max_bytes:
            cleaned.add(f"a value of {size:,} bytes of JSON cut (the limit is "
                        f"{max_bytes:,})")
            out = f"(a value of {size:,} bytes of JSON, over {max_bytes:,}, not kept)"
    return out, ("; ".join(sorted(cleaned)) or None)  # type: ignore[return-value]


_CLEANED_SURROGATE = "lone surrogates replaced by U+FFFD"


def _clean(value: object, depth: int, cleaned: set[str]) -> JSON:
    """``storable``'s walk (recursion bounded by MAX_NESTING)."""
    if value is None or value is True or value is False:
        return value
    if isinstance(value, str):
        text = clean_text(str.__str__(value))
        if text != value:
            cleaned.add(_CLEANED_SURROGATE)
        return text
    if isinstance(value, bool | int):
        number = int(value)
        if number.bit_length() > _SAFE_INT_BITS and not -_INT_BOUND < number < _INT_BOUND:
            cleaned.add(f"integers of more than {MAX_INT_DIGITS:,} digits replaced")
            return f"(an integer of {number.bit_length():,} bits)"
        return number
    if isinstance(value, float):
        if math.isfinite(value):
            return float(value)
        cleaned.add("NaN and infinities dropped (stored as null)")
        return None
    if isinstance(value, bytes | bytearray | memoryview):
        cleaned.add("bytes stored as text")
        return _clean(bytes(value).decode("utf-8", "replace"), depth, cleaned)
    if isinstance(value, dict | list | tuple | set | frozenset):
        if depth >= MAX_NESTING:
            cleaned.add(f"nesting past {MAX_NESTING} levels cut")
            return f"(nested more than {MAX_NESTING} levels deep)"
        if isinstance(value, dict):
            return {_clean_key(key, cleaned): _clean(item, depth + 1, cleaned)
                    for key, item in value.items()}
        return [_clean(item, depth + 1, cleaned) for item in value]
    cleaned.add(f"{clean_text(type(value).__name__)} objects stored as their repr")
    return _clean(_repr(value), depth, cleaned)


def _clean_key(key: object, cleaned: set[str]) -> str:
    if isinstance(key, str):
        return _clean(key, 0, cleaned)  # type: ignore[return-value]
    cleaned.add("keys that are not strings stored as their repr")
    return clean_text(_repr(key))


def _repr(value: object) -> str:
    """``repr(value)``, cut to 200 characters; a repr that fails is named, not raised."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - any object's repr: a text naming it instead
        return f"<{type(value).__name__} object (its repr failed)>"
    return text if len(text) <= 200 else f"{text[:200]}..."


def key_path(path: str, key: str) -> str:
    """``path.key``, or ``path["odd key"]`` for a key that is not a plain name (escaped,
    so a path never carries a character that cannot be printed)."""
    if _PLAIN_KEY.fullmatch(key):
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key)}]"


def _convert(value: object, path: str, depth: int, size: list[int]) -> JSON:
    """The recursive walk; ``size[0]`` accumulates an upper bound of the encoded size."""
    if value is None or value is True or value is False:
        size[0] += 5
        return value
    if isinstance(value, str):
        _check_str(value, path)
        size[0] += len(value) * _BYTES_PER_CHAR + 2
        return value
    if isinstance(value, int):
        if value.bit_length() > _SAFE_INT_BITS and not -_INT_BOUND < value < _INT_BOUND:
            raise NotJSON(path, f"is an integer of more than {MAX_INT_DIGITS:,} digits, "
                          f"which JSON text cannot carry in Python (store it as a string)")
        size[0] += value.bit_length() // 3 + 2
        return value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise NotJSON(path, f"is {value}, which JSON cannot hold")
        size[0] += 24
        return value
    if isinstance(value, dict | list | tuple):
        if depth >= MAX_NESTING:
            raise NotJSON(path, f"nests lists and dicts more than {MAX_NESTING} levels "
                          f"deep (or contains itself)")
        if isinstance(value, dict):
            return _convert_dict(value, path, depth + 1, size)
        size[0] += len(value) + 2
        return [_convert(item, f"{path}[{i}]", depth + 1, size)
                for i, item in enumerate(value)]
    raise NotJSON(path, f"is a {type(value).__name__}, which is not JSON "
                  f"(use dicts, lists, strings, numbers, booleans or None)")


def _convert_dict(value: dict[object, object], path: str, depth: int,
                  size: list[int]) -> JSON:
    out: dict[str, JSON] = {}
    size[0] += 2
    for key, item in value.items():
        if not isinstance(key, str):
            raise NotJSON(path, f"has a {type(key).__name__} key {ascii(key)[:60]}, "
                          f"but JSON keys are strings")
        _check_str(key, path, what="key")
        size[0] += len(key) * _BYTES_PER_CHAR + 4
        out[key] = _convert(item, key_path(path, key), depth, size)
    return out


def _check_str(text: str, path: str, *, what: str = "string") -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start]
        raise NotJSON(path, f"has a {what} with a lone surrogate {bad!a} at "
                      f"position {exc.start}, which is not valid Unicode (UTF-8 cannot "
                      f"encode it)") from None


def _check_size(value: JSON, max_bytes: int) -> None:
    exact = len(json.dumps(value, ensure_ascii=False, separators=(",", ":"))
                .encode("utf-8"))
    if exact > max_bytes:
        raise NotJSON("", f"is {exact:,} bytes of JSON, over limits.max_output_bytes "
                      f"({max_bytes:,} bytes); return less (store big data elsewhere and "
                      f"return a reference) or raise the limit in the definition")



def find_problems(value: object, *, limit: int = 20) -> list[NotJSON]:
    """Every place (up to ``limit``) where ``value`` is not JSON, without copying it and
    without recursion (a definition may be nested 100,000 levels deep); a container
    nested past ``MAX_NESTING`` levels is reported once and not entered."""
    if _plain_bound(value, 0) >= 0:  # the common case: a quick pass without key paths
        return []
    found: list[NotJSON] = []
    stack: list[tuple[object, str, int]] = [(value, "", 0)]
    pop, push = stack.pop, stack.append
    while stack and len(found) < limit:
        node, path, depth = pop()
        kind = type(node)
        if kind is str:
            if not node.isascii():  # type: ignore[attr-defined]
                _collect(found, _check_str, node, path)
        elif kind is dict:
            if depth >= MAX_NESTING:
                found.append(_too_deep(path))
                continue
            for key, item in node.items():  # type: ignore[attr-defined]
                if type(key) is not str:
                    found.append(NotJSON(path, f"has a {type(key).__name__} key "
                                         f"{ascii(key)[:60]}, but keys are strings "
                                         f"(quote it)"))
                    continue
                _collect(found, _check_str, key, path, what="key")
                push((item, key_path(path, key), depth + 1))
        elif kind is list:
            if depth >= MAX_NESTING:
                found.append(_too_deep(path))
                continue
            for i, item in enumerate(node):  # type: ignore[arg-type]
                push((item, f"{path}[{i}]", depth + 1))
        elif node is None or kind is bool:
            continue
        elif isinstance(node, tuple | list | dict):  # subclasses: read as the base type
            push((_convert_shallow(node), path, depth))
        else:  # big ints, NaN, infinities, and what is not JSON at all
            _collect(found, _convert, node, path, 0, [0])
    return found


def _collect(found: list[NotJSON], check: Callable[..., object], *args: Any,
             **kwargs: Any) -> None:
    try:
        check(*args, **kwargs)
    except NotJSON as exc:
        found.append(exc)


def _convert_shallow(node: tuple[object, ...] | list[object] | dict[object, object]
                     ) -> object:
    return dict(node) if isinstance(node, dict) else list(node)


def _too_deep(path: str) -> NotJSON:
    return NotJSON(path, f"nests lists and mappings more than {MAX_NESTING} levels deep "
                   f"(or contains itself)")


def _plain_bound(value: object, depth: int) -> int:
    """An upper bound of the encoded size of ``value`` when it is JSON built of plain
    dicts and lists (recursion bounded by MAX_NESTING); -1 says only: look closer."""
    kind = type(value)
    if kind is str:
        text = cast(str, value)
        return len(text) * _BYTES_PER_CHAR + 2 if text.isascii() or _encodes(text) else -1
    if kind is dict:
        if depth >= MAX_NESTING:
            return -1
        depth += 1
        total = 2
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str or not (key.isascii() or _encodes(key)):
                return -1
            kind = type(item)
            if kind is str:
                if not (item.isascii() or _encodes(item)):
                    return -1
                size = len(item) * _BYTES_PER_CHAR + 2
            elif kind is bool or item is None:
                size = 5
            elif kind is int:  # inline (as str): the usual values of an output
                bits = item.bit_length()
                if bits > _SAFE_INT_BITS:
                    return -1
                size = bits // 3 + 2
            else:
                size = _plain_bound(item, depth)
                if size < 0:
                    return -1
            total += size + len(key) * _BYTES_PER_CHAR + 4
        return total
    if kind is list:
        if depth >= MAX_NESTING:
            return -1
        total = len(value) + 2  # type: ignore[arg-type]
        for item in value:  # type: ignore[attr-defined]
            size = _plain_bound(item, depth + 1)
            if size < 0:
                return -1
            total += size
        return total
    if kind is int:
        bits = value.bit_length()  # type: ignore[attr-defined]
        return bits // 3 + 2 if bits <= _SAFE_INT_BITS else -1
    if kind is float:
        return 24 if math.isfinite(value) else -1  # type: ignore[arg-type]
    return 5 if value is None or kind is bool else -1


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
