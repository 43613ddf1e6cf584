"""Handlers of the support-router example (called by flow.yaml).

A real router would call a model to classify; this one uses keywords so the example is
deterministic and runs offline.
"""

from __future__ import annotations

REFUND_WORDS = ("refund", "money back", "charged twice")
TECHNICAL_WORDS = ("crash", "error", "bug", "broken", "login")


def classify(text: str) -> dict[str, object]:
    """Return the ticket's intent; flow.yaml declares `outputs: [intent]`, so the
    `intent` key lands in the shared state for the handlers' `when` guards."""
    lowered = text.lower()
    if any(word in lowered for word in REFUND_WORDS):
        intent = "refund"
    elif any(word in lowered for word in TECHNICAL_WORDS):
        intent = "technical"
    else:
        intent = "general"
    return {"intent": intent, "length": len(text)}


def refund(input: dict[str, object]) -> str:
    customer = input.get("customer", "there")
    return f"Hi {customer}, your refund is on its way (3-5 business days)."


def technical(input: dict[str, object]) -> str:
    return "Sorry about that! We opened a bug report and will update you within 24 hours."


def general(input: dict[str, object]) -> str:
    return "Thanks for writing in; a member of the team will reply shortly."


def escalate(text: str, intent: str) -> dict[str, str]:
    return {"paged": "on-call", "summary": f"[{intent}] {text[:80]}"}
