"""The Temporal clients' data converter: the SDK's JSON payloads, decoded to the same
values as the SDK's own converter decodes them."""

from __future__ import annotations

import json

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.converter import DataConverter

from app.temporal.converter import DATA_CONVERTER
from app.temporal.messages import CallSpec, Chain, PlanInput, PlanResult, RunRef

RUN = RunRef("run-1", "tester", None, "hash", "parallel", {"trace_id": "t"}, 3, "batch-1", 9.5)
PLAN = PlanInput(
    RUN,
    [
        Chain("a", [CallSpec(0, "1", "echo", {"text": "a", "n": [1, 2.5]}, True, 60.0)]),
        Chain(None, [CallSpec(1, "1", "echo", {}, False, 1.0), CallSpec(2, "2", "x", {}, True, 2)]),
    ],
    2,
    30.0,
)


def test_payloads_are_the_sdks_and_decode_to_what_the_sdk_decodes() -> None:
    ours = DATA_CONVERTER.payload_converter
    sdks = DataConverter.default.payload_converter

    (payload,) = ours.to_payloads([PLAN])

    assert payload == sdks.to_payloads([PLAN])[0]
    assert ours.from_payloads([payload], [PlanInput]) == [PLAN]
    assert sdks.from_payloads([payload], [PlanInput]) == [PLAN]


def test_missing_defaulted_fields_take_their_defaults_and_unknown_ones_are_ignored() -> None:
    given = {"status": "succeeded", "unknown": 1}
    payload = Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(given).encode())

    (result,) = DATA_CONVERTER.payload_converter.from_payloads([payload], [PlanResult])

    assert result == PlanResult("succeeded", [])


def test_a_missing_required_field_is_an_error() -> None:
    given = {"seq": 0, "call_key": "1"}
    payload = Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(given).encode())

    with pytest.raises(Exception, match=r"CallSpec|tool"):
        DATA_CONVERTER.payload_converter.from_payloads([payload], [CallSpec])
