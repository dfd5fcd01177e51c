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

from app.foundation.canonical import canonical_json, sha256_digest
from app.foundation.serialization import json_bytes

DEFAULT_MAX_STORED_OUTPUT_BYTES = 1024 * 1024
PREVIEW_BYTES = 512


class StoredOutput(NamedTuple):
    value: Any
    digest: str | None = None
    truncated: bool = False
    # A whole output's JSON, as the store writes it (`app.foundation.serialization.dumps`),
    # when orjson wrote it while sizing it.
    json: bytes | None = None


WHOLE_NONE = StoredOutput(None)


def stored_output(output: Any, max_bytes: int, written: bytes | None = None) -> StoredOutput:
    """The copy of `output` (already redacted) to store under a cap of `max_bytes`.
    `written`: the output's JSON as orjson writes it, when the caller has it."""
    if output is None:
        return WHOLE_NONE
    text, as_stored = (written, True) if written is not None else _dumps(output)
    if len(text) <= max_bytes:
        return StoredOutput(output, None, False, text if as_stored else None)
    digest = sha256_digest(_canonical(output, text))
    preview = text[: min(PREVIEW_BYTES, max_bytes // 4)].decode(errors="ignore")
    marker = {"truncated": True, "size_bytes": len(text), "digest": digest, "preview": preview}
    return StoredOutput(marker, digest, True)


def _dumps(value: Any) -> tuple[bytes, bool]:
    """The value's JSON, and whether it is byte for byte what the store writes
    (`app.foundation.serialization.json_bytes`: string keys only first, orjson's quicker
    path, then other keys written as strings); the stdlib's, for integers beyond
    64 bits, is not."""
    try:
        return json_bytes(value), True
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode(), False


def _canonical(output: Any, text: bytes) -> bytes:
    try:
        return canonical_json(output)
    except (TypeError, ValueError):
        # Enum members and UUIDs: canonical JSON of what was written for them.
        return canonical_json(json.loads(text))
