"""The audit bundle: chained rows and the checkpoints over them, as JSON lines.

A bundle is self-contained: `toolloop audit verify` checks it with no database
and nothing of the service but `app.foundation`. Its lines, in this order:

- the header: `{"format": "toolloop-audit-bundle", "version": 1, "created_at",
  "selection", "chains", "key_id"}`. `selection` says what was exported (`{"run_id"}`
  or `{"since", "until"}`), `chains` the chain ids the bundle holds (a run's id,
  or `day:YYYY-MM-DD` for the audit rows of no run), `key_id` the id of the key
  that signed the checkpoints (null when none is signed);
- one line per stored row, `{"kind": "receipt" | "audit", "row": {...}}`, the
  row's columns as stored (times as RFC 3339 UTC text, JSON columns as their
  values) with its `chain_seq` and `chain_link`;
- one line per checkpoint, `{"kind": "checkpoint", "row": {...}}`: `seq`,
  `created_at`, `runs`, `prev`, `link`, `signature`, `key_id`;
- the last line, `{"kind": "end", "lines": N}`: how many lines came before it,
  so that a bundle cut short says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

FORMAT = "toolloop-audit-bundle"
VERSION = 1
RECEIPT_LINE = "receipt"
AUDIT_LINE = "audit"
CHECKPOINT_LINE = "checkpoint"
END_LINE = "end"
_ROW_LINES = (RECEIPT_LINE, AUDIT_LINE, CHECKPOINT_LINE)
_CHECKPOINT_KEYS = ("seq", "created_at", "runs", "prev", "link", "signature", "key_id")


class BundleUnreadable(ValueError):
    """The bundle is not one: not JSON lines, not this format or version, a line
    missing what every line of its kind has."""


@dataclass(frozen=True, slots=True)
class Bundle:
    header: dict[str, Any]
    receipts: list[dict[str, Any]] = field(default_factory=list)
    audit: list[dict[str, Any]] = field(default_factory=list)
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    # False when the bundle ends before its end line (or says another count).
    complete: bool = True


def header(
    *, created_at: str, selection: Mapping[str, Any], chains: Iterable[str], key_id: str | None
) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "created_at": created_at,
        "selection": dict(selection),
        "chains": list(chains),
        "key_id": key_id,
    }


def line(value: Mapping[str, Any]) -> bytes:
    """One line of a bundle, with its newline."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE)


def row_line(kind: str, row: Mapping[str, Any]) -> bytes:
    return line({"kind": kind, "row": dict(row)})


def end_line(lines_before: int) -> bytes:
    return line({"kind": END_LINE, "lines": lines_before})


def read_bundle(lines: Iterable[bytes]) -> Bundle:
    """The bundle these lines hold; raises `BundleUnreadable` for what is not one."""
    numbered = _parsed(lines)
    first = next(numbered, None)
    if first is None:
        raise BundleUnreadable("the bundle is empty")
    bundle = Bundle(header=_header(first[1]))
    seen = 1
    for number, value in numbered:
        kind = value.get("kind")
        if kind == END_LINE:
            lines_before = value.get("lines")
            if next(numbered, None) is not None:
                raise BundleUnreadable(f"line {number + 1}: a line after the end line")
            return _ended(bundle, lines_before == seen)
        if kind not in _ROW_LINES or not isinstance(value.get("row"), dict):
            raise BundleUnreadable(f"line {number}: not a receipt, audit, checkpoint or end line")
        _add(bundle, kind, value["row"], number)
        seen += 1
    return _ended(bundle, False)


def _parsed(lines: Iterable[bytes]) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise BundleUnreadable(f"line {number}: not JSON ({exc})") from None
        if not isinstance(value, dict):
            raise BundleUnreadable(f"line {number}: not a JSON object")
        yield number, value


def _header(value: dict[str, Any]) -> dict[str, Any]:
    if value.get("format") != FORMAT:
        raise BundleUnreadable(f"line 1: not a {FORMAT} header")
    if value.get("version") != VERSION:
        raise BundleUnreadable(
            f"line 1: version {value.get('version')!r}; this verifier reads version {VERSION}"
        )
    chains = value.get("chains")
    if not isinstance(chains, list) or not all(isinstance(c, str) for c in chains):
        raise BundleUnreadable("line 1: `chains` is not a list of chain ids")
    return value


def _add(bundle: Bundle, kind: str, row: dict[str, Any], number: int) -> None:
    if kind == CHECKPOINT_LINE:
        missing = [key for key in _CHECKPOINT_KEYS if key not in row]
        if missing:
            raise BundleUnreadable(f"line {number}: a checkpoint without {', '.join(missing)}")
        bundle.checkpoints.append(row)
        return
    missing = [key for key in ("run_id", "chain_seq", "chain_link") if key not in row]
    if missing:
        raise BundleUnreadable(f"line {number}: a row without {', '.join(missing)}")
    (bundle.receipts if kind == RECEIPT_LINE else bundle.audit).append(row)


def _ended(bundle: Bundle, complete: bool) -> Bundle:
    return Bundle(bundle.header, bundle.receipts, bundle.audit, bundle.checkpoints, complete)
