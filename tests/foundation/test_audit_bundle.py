from __future__ import annotations

import pytest

from app.foundation.audit_bundle import (
    AUDIT_LINE,
    CHECKPOINT_LINE,
    RECEIPT_LINE,
    BundleUnreadable,
    end_line,
    header,
    line,
    read_bundle,
    row_line,
)

HEADER = line(
    header(created_at="2026-01-01T00:00:00.000000Z", selection={}, chains=["r"], key_id=None)
)
RECEIPT = row_line(RECEIPT_LINE, {"id": "x", "run_id": "r", "chain_seq": 1, "chain_link": "ab"})
AUDIT = row_line(AUDIT_LINE, {"id": 1, "run_id": "r", "chain_seq": 2, "chain_link": "cd"})
CHECKPOINT = row_line(
    CHECKPOINT_LINE,
    {
        "seq": 1,
        "created_at": "2026-01-01T00:00:00.000000Z",
        "runs": [],
        "prev": "00",
        "link": "11",
        "signature": None,
        "key_id": None,
    },
)


def test_a_bundle_reads_back_as_written() -> None:
    bundle = read_bundle([HEADER, RECEIPT, AUDIT, CHECKPOINT, end_line(4)])

    assert bundle.complete
    assert bundle.header["chains"] == ["r"]
    assert [row["id"] for row in bundle.receipts] == ["x"]
    assert [row["id"] for row in bundle.audit] == [1]
    assert [row["seq"] for row in bundle.checkpoints] == [1]


@pytest.mark.parametrize(
    "lines",
    [
        [HEADER, RECEIPT],
        [HEADER, RECEIPT, end_line(3)],
        [HEADER, RECEIPT, AUDIT, end_line(2)],
    ],
    ids=["no end line", "end counts more", "end counts fewer"],
)
def test_a_bundle_cut_short_or_padded_is_not_complete(lines: list[bytes]) -> None:
    assert read_bundle(lines).complete is False


@pytest.mark.parametrize(
    ("lines", "said"),
    [
        ([], "empty"),
        ([b"not json\n"], "line 1: not JSON"),
        ([b"[1, 2]\n"], "line 1: not a JSON object"),
        ([b'{"format": "other", "version": 1}\n'], "not a toolloop-audit-bundle header"),
        ([HEADER.replace(b'"version":1', b'"version":2')], "version 2"),
        ([HEADER, b'{"kind": "surprise", "row": {}}\n'], "line 2: not a receipt"),
        ([HEADER, row_line(RECEIPT_LINE, {"id": "x"})], "line 2: a row without run_id"),
        ([HEADER, row_line(CHECKPOINT_LINE, {"seq": 1})], "a checkpoint without created_at"),
        ([HEADER, end_line(1), RECEIPT], "line 3: a line after the end line"),
    ],
)
def test_what_is_not_a_bundle_says_why(lines: list[bytes], said: str) -> None:
    with pytest.raises(BundleUnreadable, match=said):
        read_bundle(lines)
