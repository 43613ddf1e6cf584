"""Static descriptions of built-in step types whose code is loaded on first use.

The http type's code needs httpx (~50 ms to import); registering it from these constants
keeps ``import plait`` and every CLI command that runs no http step free of that cost.
"""

from __future__ import annotations

HTTP_FIELDS = frozenset({"method", "url", "headers", "params", "json", "body", "expect",
                         "follow_redirects"})

# the llm fields that make its request (api_key_env only names the key): ctx.llm's too
LLM_REQUEST_FIELDS = ("base_url", "model", "messages", "prompt", "response_format",
                      "temperature", "max_tokens", "tools", "stream")
LLM_FIELDS = frozenset({*LLM_REQUEST_FIELDS, "api_key_env"})
