"""Static descriptions of built-in step types whose code is loaded on first use.

The http type's code needs httpx (~50 ms to import); registering it from these constants
keeps ``import plait`` and every CLI command that runs no http step free of that cost.
"""

from __future__ import annotations

HTTP_FIELDS = frozenset({"method", "url", "headers", "params", "json", "body", "expect",
                         "follow_redirects"})

LLM_FIELDS = frozenset({"base_url", "model", "messages", "prompt", "api_key_env",
                        "response_format", "temperature", "max_tokens", "tools"})
