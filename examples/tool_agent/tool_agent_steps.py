"""The tool agent of flow.yaml: the model picks tools in a loop, durably.

Each model call is ``ctx.llm`` (named ``model-N`` by turn) and each tool call is
``ctx.run`` (``tool-N-I``): both are journaled, so a retried or resumed attempt of the
step replays the completed ones from the run's store (no request, no tokens, no tool
run twice) and continues where the last attempt stopped.  The loop itself is ordinary
Python: the journal makes it durable, provided each call keeps its name on every
attempt.
"""

from __future__ import annotations

import json
from typing import Any

from plait import StepContext


def count_words(text: str) -> dict[str, Any]:
    return {"words": len(text.split())}


def count_letters(text: str) -> dict[str, Any]:
    return {"letters": sum(c.isalpha() for c in text)}


def reverse_words(text: str) -> dict[str, Any]:
    return {"reversed": " ".join(reversed(text.split()))}


TOOLS = {f.__name__: f for f in (count_words, count_letters, reverse_words)}


def _tool(name: str, description: str) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "required": ["text"],
                       "properties": {"text": {"type": "string"}}}}}


TOOL_DEFS = [_tool("count_words", "How many words a text has"),
              _tool("count_letters", "How many letters a text has"),
              _tool("reverse_words", "The text's words in reverse order")]

SYSTEM = ("You describe a text. Call the tools you need, one at a time, then answer "
          "in one sentence.")


def call_tool(name: str, arguments: Any) -> Any:
    """A tool's result, or an error the model reads (an unknown tool, bad arguments)."""
    tool = TOOLS.get(name)
    if tool is None:
        return {"error": f"no tool named {name!r}; the tools are {', '.join(TOOLS)}"}
    if not isinstance(arguments, dict):
        return {"error": f"arguments must be an object, got {type(arguments).__name__}"}
    try:
        return tool(**arguments)
    except TypeError as exc:
        return {"error": f"bad arguments for {name}: {exc}"}


def assistant_message(reply: dict[str, Any]) -> dict[str, Any]:
    """The model's reply as the next request's assistant message (OpenAI's shape)."""
    return {"role": "assistant", "content": reply["content"] or None, "tool_calls": [
        {"id": c["id"], "type": "function",
         "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
        for c in reply["tool_calls"]]}


async def agent(ctx: StepContext, task: str, base_url: str, model: str = "gpt-4o-mini",
                max_turns: int = 8) -> dict[str, Any]:
    messages: list[Any] = [{"role": "system", "content": SYSTEM},
                           {"role": "user", "content": task}]
    called: list[str] = []
    for turn in range(max_turns):
        reply = await ctx.llm(f"model-{turn}", base_url=base_url, model=model,
                              api_key_env="OPENAI_API_KEY", messages=messages,
                              tools=TOOL_DEFS, temperature=0)
        if not reply["tool_calls"]:
            return {"answer": reply["content"], "turns": turn + 1, "tools_called": called}
        messages.append(assistant_message(reply))
        for i, call in enumerate(reply["tool_calls"]):
            result = await ctx.run(f"tool-{turn}-{i}", call_tool, call["name"],
                                   call["arguments"])
            called.append(call["name"])
            messages.append({"role": "tool", "tool_call_id": call["id"],
                             "content": json.dumps(result)})
    raise RuntimeError(f"the model still called tools after {max_turns} turns")
