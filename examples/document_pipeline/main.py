"""A document pipeline whose dependencies come from declared output keys.

    decrypt -> paginate -> [classify, extract_keywords] -> to_csv

No step names another: each declares the shared-state keys it writes
(``outputs=[...]``) and takes parameters named after the keys it reads.  plait turns
"``paginate`` reads ``text``, which ``decrypt`` writes" into the edge
decrypt -> paginate, so classify and extract_keywords (both reading ``pages``) run in
parallel and ``to_csv`` waits for both.

Run it:

    python examples/document_pipeline/main.py

It prints the inferred plan (stages and critical path) and the CSV the run produced.
The "encryption" is ROT13, so the example needs nothing but plait.
"""

from __future__ import annotations

import codecs
import csv
import io
import re
import sys
from collections import Counter
from typing import Any

from plait import Workflow

PAGE_WORDS = 12  # words per page
STOPWORDS = frozenset({"a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "in",
                       "is", "it", "of", "on", "or", "that", "the", "to", "this", "was",
                       "were", "will", "with"})

SAMPLE = codecs.encode(
    "Invoice 1042 from Acme Tools. The customer ordered twelve steel hammers and four "
    "boxes of nails. Payment is due within thirty days of the invoice date. Late "
    "payment of the invoice will add a fee of two percent per month. Thank you for "
    "ordering steel hammers from Acme Tools.", "rot13")

wf = Workflow("document-pipeline", description="decrypt, paginate, classify and index "
              "a document, then write a CSV")


@wf.step(outputs=["text"])
def decrypt(input: dict[str, Any]) -> str:
    return codecs.decode(input["ciphertext"], "rot13")


@wf.step(outputs=["pages"])
def paginate(text: str) -> list[str]:
    words = text.split()
    return [" ".join(words[i:i + PAGE_WORDS]) for i in range(0, len(words), PAGE_WORDS)]


@wf.step(outputs=["category"])
def classify(pages: list[str]) -> str:
    body = " ".join(pages).lower()
    if "invoice" in body or "payment" in body:
        return "invoice"
    if "agreement" in body or "party" in body:
        return "contract"
    return "letter"


@wf.step(outputs=["keywords"])
def extract_keywords(pages: list[str]) -> list[str]:
    words = re.findall(r"[a-z]+", " ".join(pages).lower())
    counts = Counter(w for w in words if w not in STOPWORDS and len(w) > 3)
    return [word for word, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:5]]


@wf.step(outputs=["csv"])
def to_csv(pages: list[str], category: str, keywords: list[str]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["page", "category", "keywords", "words", "first_words"])
    for number, page in enumerate(pages, start=1):
        writer.writerow([number, category, " ".join(keywords), len(page.split()),
                         " ".join(page.split()[:4])])
    return out.getvalue()


def main() -> int:
    plan = wf.plan()
    print("inferred dependencies:")
    for step in wf.spec.steps:
        print(f"  {step.id:<17} <- {', '.join(step.depends_on) or '(run input)'}")
    print("stages:", " | ".join(", ".join(stage) for stage in plan.stages))
    print("critical path:", " -> ".join(plan.critical_path))
    result = wf.run({"ciphertext": SAMPLE})
    print(f"status: {result.status}")
    print()
    output: Any = result.output
    print(output["to_csv"], end="")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
