"""Text-processing tools. Each receives exactly its admitted arguments as keywords."""

from __future__ import annotations

import asyncio
import hashlib
import re
import unicodedata
from typing import Any

from app.engine import current_call

_GLOSSARY = {
    "toolloop": "A governed execution service for registered tools.",
    "receipt": "The durable record of one tool call.",
    "lane": "An ordered list of calls inside a parallel plan.",
}


def normalize_text(text: str, lowercase: bool = False) -> dict[str, Any]:
    normalized = " ".join(unicodedata.normalize("NFC", text).split())
    return {"text": normalized.lower() if lowercase else normalized}


def word_count(text: str) -> dict[str, Any]:
    return {"words": len(re.findall(r"\w+", text))}


async def slow_lookup(term: str, delay_s: float = 0.05) -> dict[str, Any]:
    await asyncio.sleep(delay_s)
    definition = _GLOSSARY.get(term.strip().lower())
    return {"term": term, "found": definition is not None, "definition": definition}


def summarize(text: str, max_words: int = 12) -> dict[str, Any]:
    words = text.split()
    if not words:
        return {
            "status": "failed",
            "summary": "",
            "diagnosis_ready": True,
            "reason_code": "empty_text",
            "failure_kind": "input",
            "diagnosis_facts": {"words": 0},
        }
    truncated = len(words) > max_words
    return {
        "status": "partial" if truncated else "success",
        "summary": " ".join(words[:max_words]),
        "diagnosis_ready": False,
        "reason_code": "truncated" if truncated else None,
        "failure_kind": None,
        "diagnosis_facts": {"words": len(words)},
    }


async def analyze_text(text: str) -> dict[str, Any]:
    """A registered production router: dispatches its work to other registered tools."""
    call = current_call()
    normalized = await call.dispatch("normalize_text", {"text": text})
    if not normalized.succeeded:
        raise RuntimeError(f"normalize_text ended {normalized.status}")
    counted = await call.dispatch("word_count", {"text": normalized.output["text"]})
    if not counted.succeeded:
        raise RuntimeError(f"word_count ended {counted.status}")
    return {"text": normalized.output["text"], "words": counted.output["words"]}


def publish_note(title: str, text: str) -> dict[str, Any]:
    """Pretend to publish a note; the id is derived from the title, so replays agree."""
    digest = hashlib.sha256(title.encode()).hexdigest()[:12]
    return {"note_id": f"note-{digest}", "title": title, "words": len(text.split())}
