"""``plait show``'s text of a run's model calls: its tokens line, the tokens-by-step
table and a step's conversation.  Their JSON is the run document's
(``plait.rundoc.llm_calls``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from ..core.model import JSON, JSONDict
from ..observe.tokens import Tokens
from ..rundoc.llm_calls import RollUp, add_llm, request_json, requests, roll_up, step_tokens
from ..store.base import EventRecord

# what the run document's roll-up gives, importable beside its text
__all__ = ["MODEL_HEADERS", "RollUp", "Tokens", "add_llm", "conversation_lines", "models_of",
           "roll_up", "step_tokens", "token_rows", "tokens_line"]

MODEL_HEADERS = ("STEP", "MODEL", "PROMPT", "COMPLETION", "TOTAL")


def tokens_line(rolled: RollUp) -> tuple[str, str] | None:
    """``plait show``'s header line of the run's tokens (None when it used none)."""
    total, budget = rolled.total, rolled.budget
    if not total and budget is None:
        return None
    below = rolled.in_children.total
    text = total.text() + (f"; {below:,} of them in child runs" if below else "")
    if budget is not None:
        spent = " spent" if budget[1] >= budget[0] else ""
        text += f"; budget {budget[0]:,}{spent} ({budget[1]:,} used)"
    return ("tokens", text)


def token_rows(rolled: RollUp, models: Mapping[str, str],
               order: Sequence[str]) -> list[list[str]]:
    """One row per step that used tokens (its own, or its child runs')."""
    rows = []
    for step_id in order:
        tokens = rolled.of_step(step_id)
        if not tokens:
            continue
        model = models.get(step_id) or ("(child runs)" if step_id in rolled.children else "-")
        rows.append([step_id, model, f"{tokens.prompt:,}", f"{tokens.completion:,}",
                     f"{tokens.total:,}"])
    return rows


def models_of(events: Sequence[EventRecord]) -> dict[str, str]:
    """Step -> the model that answered its latest call (else the one asked)."""
    out = {sid: str(note.get("model")) for sid, note in requests(events).items()}
    for event in events:
        usage = event.data.get("usage") if event.kind == "note" else None
        if event.step_id is not None and isinstance(usage, dict) and usage.get("model"):
            out[event.step_id] = str(usage["model"])
    return out


def conversation_lines(request: JSONDict | None, output: JSON) -> list[str]:
    """A step's model call as text: each message sent (``role: content``, later lines
    of a content indented), then the answer (its content, and its JSON indented)."""
    lines: list[str] = []
    if request is not None:
        entry = request_json(request)
        lines.append(f"messages sent (attempt {entry['attempt']}, model {entry['model']})")
        for message in entry["messages"] if isinstance(entry["messages"], list) else []:
            lines += _message_lines(message)
        if entry["cut"]:
            lines.append(f"  (cut: {entry['cut']})")
    if isinstance(output, dict) and isinstance(output.get("content"), str):
        lines.append("answer")
        lines += _message_lines({"role": "assistant", "content": output["content"],
                                 "tool_calls": output.get("tool_calls")})
        if output.get("json") is not None:
            lines.append("answer as JSON")
            text = json.dumps(output["json"], indent=2, ensure_ascii=False)
            lines += [f"  {line}" for line in text.splitlines()]
    return lines


def _message_lines(message: JSON) -> list[str]:
    role = message.get("role") if isinstance(message, dict) else None
    content = message.get("content") if isinstance(message, dict) else message
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    calls = calls if isinstance(calls, list) else []
    text = content if isinstance(content, str) else "" if content is None and calls \
        else json.dumps(content, ensure_ascii=False)
    first, *rest = text.splitlines() or [""]
    return [f"  {role or '?'}: {first}".rstrip(), *(f"    {line}" for line in rest),
            *(f"    calls {_call_text(call)}" for call in calls)]


def _call_text(call: JSON) -> str:
    """A tool call as ``name(arguments)``: as sent (OpenAI's shape) or as answered (an
    llm output's ``tool_calls``)."""
    found = call if isinstance(call, dict) else {}
    function = found.get("function")
    where = function if isinstance(function, dict) else found
    arguments = where.get("arguments")
    text = arguments if isinstance(arguments, str) else json.dumps(arguments,
                                                                   ensure_ascii=False)
    return f"{where.get('name')}({text})"
