"""The stored copy of a call's (redacted) output: whole up to a size cap, else a marker.

An output whose JSON is larger than the cap (`TOOLLOOP_MAX_STORED_OUTPUT_BYTES`)
is stored as a marker object holding its size, the sha256 of its canonical
JSON and a short preview; the receipt row says `output_truncated` and keeps
the digest in `output_digest`, so a caller holding the full output can prove
it is the one that was returned. The caller's own response is never cut.

The digest is taken only for truncated outputs: a whole stored output is its
own evidence, and hashing every output would cost about as much as the rest of
the stored copy (docs/engine.md, "Receipts and durability").
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import orjson

from app.contract.canonical import canonical_json, sha256_digest

DEFAULT_MAX_STORED_OUTPUT_BYTES = 1024 * 1024
PREVIEW_BYTES = 512


class StoredOutput(NamedTuple):
    value: Any
    digest: str | None = None
    truncated: bool = False
    # The value's JSON as the store writes it (`app.store.serialization.dumps`), when
    # it was written here by orjson: a whole output, sized.
    json: bytes | None = None


WHOLE_NONE = StoredOutput(None)


def stored_output(output: Any, max_bytes: int, written: bytes | None = None) -> StoredOutput:
    """The copy of `output` (already redacted) to store under a cap of `max_bytes`.
    `written`: the output's JSON as orjson writes it, when the caller has it."""
    if output is None:
        return WHOLE_NONE
    if written is None:
        try:
            written = orjson.dumps(output)
        except TypeError:
            written = None
    text = _dumps(output) if written is None else written
    if len(text) <= max_bytes:
        return StoredOutput(output, None, False, written)
    digest = sha256_digest(_canonical(output, text))
    preview = text[: min(PREVIEW_BYTES, max_bytes // 4)].decode(errors="ignore")
    marker = {"truncated": True, "size_bytes": len(text), "digest": digest, "preview": preview}
    return StoredOutput(marker, digest, True)


def _dumps(value: Any) -> bytes:
    # As the store writes JSON columns (app/store/serialization.py): string keys
    # only first, orjson's quicker path.
    try:
        return orjson.dumps(value)
    except TypeError:
        pass
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:  # integers beyond 64 bits
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _canonical(output: Any, text: bytes) -> bytes:
    try:
        return canonical_json(output)
    except (TypeError, ValueError):
        # Enum members and UUIDs: canonical JSON of what was written for them.
        return canonical_json(json.loads(text))
