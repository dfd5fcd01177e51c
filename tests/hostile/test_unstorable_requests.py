"""Request bodies a database could not store, or a parser could read two ways: a 422
with a pointer to each problem, and nothing runs, on SQLite and PostgreSQL alike."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from app.settings import Settings
from tests.hostile import unstorable_tools
from tests.hostile.unstorable_registry import REGISTRY
from tests.support.app import AppFactory


@pytest.fixture
def settings(make_app: AppFactory) -> Settings:
    return make_app.settings(REGISTRY)


@pytest.fixture(autouse=True)
def _fresh_tools() -> None:
    unstorable_tools.reset()


def _sequential(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"owner": "hostile", "calls": list(calls)}


def _counted(call_key: str, text: str = "x") -> dict[str, Any]:
    return {"call_key": call_key, "tool": "counted", "args": {"text": text}}


async def _post(client: httpx.AsyncClient, path: str, body: bytes) -> httpx.Response:
    return await client.post(path, content=body, headers={"content-type": "application/json"})


def _pointers(response: httpx.Response) -> list[tuple[str, str]]:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    return [(e["pointer"], e["message"]) for e in response.json()["errors"]]


async def test_a_nul_in_a_call_key_is_refused_and_the_tool_does_not_run(
    client: httpx.AsyncClient,
) -> None:
    body = orjson.dumps(_sequential(_counted("ok"), _counted("a\x00b")))

    response = await _post(client, "/plans/sequential", body)

    assert _pointers(response) == [("/calls/1/call_key", "a string may not contain U+0000")]
    assert unstorable_tools.runs == []
    # Nothing was stored either: the run list is empty.
    assert (await client.get("/runs")).json()["items"] == []


async def test_a_nul_anywhere_is_refused_with_the_pointer_of_each(
    client: httpx.AsyncClient,
) -> None:
    plan = {
        "owner": "hostile",
        "max_concurrency": 2,
        "lanes": [
            {"item_key": "lane\x00", "calls": [_counted("1")]},
            {"item_key": "b", "calls": [_counted("1", "x\x00")]},
        ],
        "context": {"k\x00/~": "v", "list": ["ok", "\x00"]},
    }

    response = await _post(client, "/plans/parallel", orjson.dumps(plan))

    assert _pointers(response) == [
        ("/lanes/0/item_key", "a string may not contain U+0000"),
        ("/lanes/1/calls/0/args/text", "a string may not contain U+0000"),
        ("/context/k\x00~1~0", "an object key may not contain U+0000"),
        ("/context/list/1", "a string may not contain U+0000"),
    ]
    assert unstorable_tools.runs == []


@pytest.mark.parametrize(
    ("raw", "pointers"),
    [
        pytest.param(
            b'{"owner": "hostile", "calls": [{"call_key": "1", "tool": "counted",'
            b' "args": {"text": "a", "text": "b"}}]}',
            ["/calls/0/args/text"],
            id="in-args",
        ),
        pytest.param(
            b'{"owner": "hostile", "owner": "hostile", "calls": [{"call_key": "1",'
            b' "call_key": "2", "tool": "counted", "args": {"text": "a"}}]}',
            ["/owner", "/calls/0/call_key"],
            id="two-objects",
        ),
        pytest.param(
            # The same key, once escaped: equal once read.
            b'{"owner": "hostile", "calls": [{"call_key": "1", "tool": "counted",'
            b' "args": {"text": "a", "\\u0074ext": "b"}}]}',
            ["/calls/0/args/text"],
            id="escaped",
        ),
        pytest.param(
            # The repeated value's colon, written as an escape, keeps the colons even.
            b'{"owner": "hostile", "calls": [{"call_key": "1", "tool": "counted",'
            b' "args": {"text": "a", "text": "\\u003a"}}]}',
            ["/calls/0/args/text"],
            id="escaped-colon",
        ),
        pytest.param(
            b'{"owner": "hostile", "calls": [{"call_key": "1", "tool": "counted",'
            b' "args": {"text": "a"}}], "context": {"a/b": {"~": 1, "~": 2}}}',
            ["/context/a~1b/~0"],
            id="escaped-pointer",
        ),
    ],
)
async def test_a_repeated_key_is_refused_with_its_pointer(
    client: httpx.AsyncClient, raw: bytes, pointers: list[str]
) -> None:
    response = await _post(client, "/plans/sequential", raw)

    assert _pointers(response) == [(p, "an object may not repeat a key") for p in pointers]
    assert unstorable_tools.runs == []


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b'{"owner": "hostile", "calls": [], "context": {"a": "b:c"}}', id="colons"),
        pytest.param(b'{"owner": "hostile", "calls": [], "context": {"a": "\\\\u0000"}}', id="n"),
        pytest.param(b'{"owner": "hostile", "calls": [], "context": {"a:": "\\u003a"}}', id="e"),
    ],
)
async def test_what_only_looks_like_a_hazard_passes_on_to_preflight(
    client: httpx.AsyncClient, body: bytes
) -> None:
    response = await _post(client, "/plans/sequential", body)

    assert _pointers(response) == [("/calls", "at least one call is required")]


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("", "call_key must be 1 to 256 characters, not 0"),
        ("k" * 257, "call_key must be 1 to 256 characters, not 257"),
        ("a\tb", "call_key may not contain control characters"),
        ("a\x7fb", "call_key may not contain control characters"),
        ("a\x9fb", "call_key may not contain control characters"),
    ],
)
async def test_a_call_key_is_one_to_256_characters_without_control_characters(
    client: httpx.AsyncClient, key: str, message: str
) -> None:
    body = orjson.dumps(_sequential(_counted("k" * 256), _counted(key)))

    response = await _post(client, "/plans/sequential", body)

    assert _pointers(response) == [("/calls/1/call_key", message)]
    assert unstorable_tools.runs == []


async def test_an_item_key_is_one_to_256_characters_without_control_characters(
    client: httpx.AsyncClient,
) -> None:
    plan = {
        "owner": "hostile",
        "max_concurrency": 2,
        "lanes": [
            {"item_key": "", "calls": [_counted("1")]},
            {"item_key": "\n", "calls": [_counted("\x1b")]},
            {"item_key": "🙂" * 256, "calls": [_counted("1")]},
        ],
    }

    response = await _post(client, "/plans/parallel", orjson.dumps(plan))

    assert _pointers(response) == [
        ("/lanes/0/item_key", "item_key must be 1 to 256 characters, not 0"),
        ("/lanes/1/item_key", "item_key may not contain control characters"),
        ("/lanes/1/calls/0/call_key", "call_key may not contain control characters"),
    ]
    assert unstorable_tools.runs == []
