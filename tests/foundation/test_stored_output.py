from __future__ import annotations

import uuid

import orjson

from app.foundation.canonical import canonical_json, sha256_digest
from app.foundation.serialization import json_bytes
from app.foundation.stored_output import stored_output


def test_an_output_within_the_cap_is_kept_whole_without_a_digest() -> None:
    output = {"text": "x" * 100}
    assert stored_output(output, 1024)[:3] == (output, None, False)
    assert stored_output(None, 1024)[:3] == (None, None, False)


def test_an_output_over_the_cap_becomes_a_marker_with_the_canonical_digest() -> None:
    output = {"b": 1.0, "a": "\u2603" * 2000}
    value, digest, truncated, _ = stored_output(output, 1024)
    assert truncated is True
    assert digest == sha256_digest(canonical_json(output))
    assert value["digest"] == digest
    assert value["size_bytes"] == len('{"b":1.0,"a":""}') + 3 * 2000
    # Cut on a character boundary: never half a UTF-8 sequence.
    assert (
        value["preview"] == '{"b":1.0,"a":"' + "\u2603" * 80
    )  # 256 bytes: 14 + 3 * 80, and 2 bytes dropped


def test_values_written_by_value_are_digested_as_written() -> None:
    output = {"id": uuid.UUID(int=5), "pad": "x" * 2000}
    _, digest, _, _ = stored_output(output, 1024)
    assert digest == sha256_digest(canonical_json({"id": str(uuid.UUID(int=5)), "pad": "x" * 2000}))


def test_an_output_with_keys_that_are_not_strings_is_sized_as_the_store_writes_it() -> None:
    # orjson writes 1e-7 so; the stdlib would write 1e-07.
    output = {1: "x" * 30, "n": {2: 1e-7}}
    assert stored_output(output, 64)[:3] == (output, None, False)
    value, digest, truncated, _ = stored_output(output, 40)
    assert truncated is True
    assert value["size_bytes"] == len('{"1":"' + "x" * 30 + '","n":{"2":1e-7}}')
    assert digest == sha256_digest(canonical_json({"1": "x" * 30, "n": {"2": 1e-7}}))


def test_a_whole_output_carries_its_json_as_the_store_writes_it() -> None:
    output = {"text": "ünïcode", "n": [1.5, None, 1e-7]}
    assert stored_output(output, 1024).json == json_bytes(output)
    written = orjson.dumps(output)
    assert stored_output(output, 1024, written).json is written  # the caller's, not again
    # Keys that are not strings, written as strings, as the store writes them.
    assert stored_output({1: "x", "n": {2: 1e-7}}, 1024).json == b'{"1":"x","n":{"2":1e-7}}'
    # Not where the stdlib wrote it (the store's text differs), and never for a marker.
    assert stored_output({"big": 2**70}, 1024).json is None
    assert stored_output({"text": "x" * 2000}, 1024).json is None
    assert stored_output(None, 1024).json is None
