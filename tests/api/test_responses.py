"""Plan answers are encoded as they are sent: the receipts' times read as stored."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
import pytest

from app.api.responses import FastJSONResponse
from tests.writer_support import succeeded_receipt


@pytest.mark.parametrize("microsecond", [0, 500, 999_999])
def test_a_receipt_is_sent_with_the_times_its_stored_copy_writes(microsecond: int) -> None:
    # The caller's copy keeps its times as datetimes, encoded as the response is sent;
    # the stored copy holds their text. Sent, the two read the same.
    at = datetime(2026, 1, 1, 12, 0, 0, microsecond, tzinfo=UTC)
    later = at + timedelta(seconds=1)
    receipt = succeeded_receipt(0, {"n": 1})._replace(started_at=at, finished_at=later)

    sent = orjson.loads(FastJSONResponse(receipt.to_response()).body)
    stored = receipt.to_stored()

    assert sent["started_at"] == stored["started_at"] == at.isoformat()
    assert sent["finished_at"] == stored["finished_at"] == later.isoformat()


def test_an_answer_with_keys_that_are_not_strings_is_sent_with_them_as_strings() -> None:
    sent = FastJSONResponse({"a": {1: "one"}, 2: [None]}).body
    assert sent == b'{"a":{"1":"one"},"2":[null]}'
    assert FastJSONResponse({"a": [1.5, "ü"]}).body == '{"a":[1.5,"ü"]}'.encode()
