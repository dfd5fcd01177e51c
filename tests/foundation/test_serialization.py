"""JSON columns' text: orjson's quicker path, keys that are not strings, the stdlib."""

from __future__ import annotations

import json
from enum import StrEnum

import pytest

from app.foundation.serialization import dumps, json_bytes


class Kind(StrEnum):
    A = "a"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({"z": [1, 2.5, None, True], "a": "ü"}, '{"z":[1,2.5,null,true],"a":"ü"}'),
        ({1: "one", "n": {2: False}}, '{"1":"one","n":{"2":false}}'),
        ({Kind.A: 1}, '{"a":1}'),
    ],
)
def test_documents_are_written_compactly_whatever_their_keys(value: object, text: str) -> None:
    assert json_bytes(value) == text.encode()
    assert dumps(value) == text


def test_what_orjson_refuses_even_so_is_written_by_the_stdlib() -> None:
    big = {"n": 2**70, 3: [-(2**65)]}
    with pytest.raises(TypeError):
        json_bytes(big)
    assert json.loads(dumps(big)) == {"n": 2**70, "3": [-(2**65)]}
