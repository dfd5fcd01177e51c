"""`/mcp/{owner}` end to end: the official Python SDK's client against `toolloop serve`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import orjson
import pytest
from mcp.shared.exceptions import MCPError

from app.foundation.redaction import REDACTED
from tests.api.mcp.conftest import Served
from tests.api.mcp.official_client import MODES, connected
from tests.api.mcp.registry import ALLOWED, OWNER
from tests.support.waiting import wait_for

pytestmark = pytest.mark.parametrize("mode", MODES)

RUN_ID = "toolloop/run_id"
RECEIPT_ID = "toolloop/receipt_id"


def _run_id(result: types.CallToolResult) -> str:
    assert result.meta is not None
    run_id: str = result.meta[RUN_ID]
    return run_id


def _text(result: types.CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    return block.text


def _mcp_runs(served: Served) -> list[dict[str, Any]]:
    response = served.get("/runs?kind=mcp&limit=500")
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def test_the_tools_are_the_owners_allowed_tools_with_schemas_and_annotations(
    open_server: Served, mode: str
) -> None:
    async with connected(open_server.url(), mode) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}

    assert list(listed) == ALLOWED  # `hidden` is declared but not allowed
    shout = listed["shout"]
    assert shout.description == "Upper-case the text, repeated."
    assert shout.input_schema["properties"]["times"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 3,
    }
    assert shout.output_schema == {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }
    hints = {
        name: tool.annotations.model_dump(by_alias=True, exclude_none=True)
        for name, tool in listed.items()
        if tool.annotations is not None
    }
    assert hints["shout"] == {"readOnlyHint": True}
    assert hints["count_words"] == {
        "readOnlyHint": False,
        "destructiveHint": False,
        "idempotentHint": True,
    }
    assert hints["explode"] == {
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": False,
    }


async def test_a_call_answers_structured_content_and_is_an_mcp_run_with_its_receipt(
    open_server: Served, mode: str
) -> None:
    async with connected(open_server.url(), mode) as client:
        result = await client.call_tool("shout", {"text": "hi", "times": 2})

    assert not result.is_error
    assert result.structured_content == {"text": "HI HI"}
    assert orjson.loads(_text(result)) == {"text": "HI HI"}
    run_id = _run_id(result)
    run = open_server.get(f"/runs/{run_id}").json()
    assert (run["kind"], run["owner"], run["status"]) == ("mcp", OWNER, "succeeded")
    assert run["receipt_count"] == run["receipt_counts"]["succeeded"] == 1
    (receipt,) = open_server.get(f"/runs/{run_id}/receipts").json()["items"]
    assert receipt["receipt_id"] == result.meta[RECEIPT_ID]  # type: ignore[index]
    assert (receipt["tool"], receipt["output"]) == ("shout", {"text": "HI HI"})
    audit = open_server.get(f"/runs/{run_id}/audit").json()["items"]
    accepted = next(event for event in audit if event["kind"] == "plan.accepted")
    assert accepted["detail"] == {"plan_kind": "mcp", "owner": OWNER, "context": {}}


async def test_an_output_that_is_not_an_object_is_wrapped_as_the_schema_says(
    open_server: Served, mode: str
) -> None:
    async with connected(open_server.url(), mode) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        result = await client.call_tool("count_words", {"text": "one two three"})

    assert listed["count_words"].output_schema == {
        "type": "object",
        "properties": {"result": {"type": "integer"}},
        "required": ["result"],
        "additionalProperties": False,
    }
    assert result.structured_content == {"result": 3}
    assert not result.is_error
    (receipt,) = open_server.get(f"/runs/{_run_id(result)}/receipts").json()["items"]
    assert receipt["output"] == 3  # stored as the tool returned it


async def test_a_cacheable_tool_answers_a_repeated_call_from_the_cache(
    open_server: Served, mode: str
) -> None:
    async with connected(open_server.url(), mode) as client:
        first = await client.call_tool("remember", {"text": f"once {mode}"})
        second = await client.call_tool("remember", {"text": f"once {mode}"})

    assert first.structured_content == second.structured_content == {"text": f"ONCE {mode}".upper()}
    receipts = open_server.get(f"/runs/{_run_id(second)}/receipts")
    assert receipts.status_code == 200, receipts.text
    (receipt,) = receipts.json()["items"]
    assert receipt["cache_hit"] is True


async def test_invalid_arguments_run_nothing_and_name_every_problem(
    open_server: Served, mode: str
) -> None:
    before = _mcp_runs(open_server)
    async with connected(open_server.url(), mode) as client:
        result = await client.call_tool("shout", {"text": "", "times": 9, "loud": True})

    assert result.is_error
    lines = _text(result).splitlines()
    assert lines[0] == "The arguments are invalid; nothing ran."
    pointers = sorted(line.split(":", 1)[0] for line in lines[1:])
    assert pointers == ["- /arguments", "- /arguments/text", "- /arguments/times"]
    assert "loud" in _text(result)
    assert _mcp_runs(open_server) == before


async def test_a_failing_tool_is_an_error_result_with_its_receipts_error(
    open_server: Served, mode: str
) -> None:
    async with connected(open_server.url(), mode) as client:
        result = await client.call_tool("explode", {"text": "fuse"})

    assert result.is_error
    assert result.structured_content is None
    run_id = _run_id(result)
    (receipt,) = open_server.get(f"/runs/{run_id}/receipts").json()["items"]
    assert receipt["status"] == "failed"
    assert receipt["error"]["message"] in _text(result)
    assert "the tool exploded on 'fuse'" in _text(result)
    assert open_server.get(f"/runs/{run_id}").json()["status"] == "failed"


async def test_a_call_past_its_timeout_is_an_error_result_with_a_timed_out_receipt(
    open_server: Served, mode: str, tmp_path: Path
) -> None:
    async with connected(open_server.url(), mode) as client:
        result = await client.call_tool("wait_briefly", {"path": str(tmp_path / "never")})

    assert result.is_error
    (receipt,) = open_server.get(f"/runs/{_run_id(result)}/receipts").json()["items"]
    assert receipt["status"] == "timed_out"
    assert receipt["error"]["message"] in _text(result)


async def test_a_tool_that_needs_approval_waits_for_it_and_runs_once_approved(
    open_server: Served, mode: str
) -> None:
    async with connected(open_server.url(), mode) as client:
        result = await client.call_tool("transfer", {"amount": 100})

    assert result.is_error
    text = _text(result)
    assert "has not run" in text
    run_id = _run_id(result)
    assert open_server.get(f"/runs/{run_id}").json()["status"] == "pending"
    assert open_server.get(f"/runs/{run_id}/receipts").json()["items"] == []
    (waiting,) = open_server.get("/confirmations?status=pending").json()["items"]
    assert waiting["run_id"] == run_id
    assert f"POST /runs/{run_id}/confirmations/{waiting['confirmation_id']}" in text

    async with httpx.AsyncClient(base_url=open_server.base, timeout=30) as http:
        decided = await http.post(
            f"/runs/{run_id}/confirmations/{waiting['confirmation_id']}",
            json={"approve": True, "reason": "checked"},
        )
    assert decided.status_code == 202, decided.text
    await wait_for(
        lambda: open_server.get(f"/runs/{run_id}").json()["status"] not in ("pending", "running"),
        "the run went on and ended",
        every_s=0.05,
    )
    (receipt,) = open_server.get(f"/runs/{run_id}/receipts").json()["items"]
    assert receipt["tool"] == "transfer"
    assert receipt["status"] == "succeeded", receipt["error"]


async def test_a_tool_outside_allowed_tools_is_unknown(open_server: Served, mode: str) -> None:
    async with connected(open_server.url(), mode) as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("hidden", {"text": "x"})
    assert raised.value.code == types.INVALID_PARAMS
    assert "hidden" in raised.value.message


async def test_the_stored_receipt_is_redacted(open_server: Served, mode: str) -> None:
    async with connected(open_server.url(), mode) as client:
        result = await client.call_tool("sign", {"text": "memo"})

    assert not result.is_error
    (receipt,) = open_server.get(f"/runs/{_run_id(result)}/receipts").json()["items"]
    assert receipt["output"] == {"text": "memo", "token": REDACTED}


def test_a_method_other_than_post_is_405(open_server: Served, mode: str) -> None:
    for method in ("GET", "DELETE"):
        response = httpx.request(
            method, open_server.url(), headers={"Accept": "text/event-stream"}, timeout=30
        )
        assert response.status_code == 405, method
        assert response.headers["allow"] == "POST"
        assert response.headers["content-type"] == "application/problem+json"


def test_an_unknown_owner_is_a_404_problem(open_server: Served, mode: str) -> None:
    response = httpx.post(
        open_server.url("nobody"),
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Accept": "application/json, text/event-stream"},
        timeout=30,
    )
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["detail"] == "There is no owner with this name."


def test_without_keys_a_foreign_origin_or_host_is_refused(open_server: Served, mode: str) -> None:
    # A foreign Host meets the service's own check first (421, `app.api.transport_guard`);
    # a foreign Origin on a loopback Host, the endpoint's (403).
    for headers, status in (
        ({"Origin": "http://attacker.example"}, 403),
        ({"Host": "attacker.example"}, 421),
        ({"Host": "[::1"}, 421),
        ({"Origin": "http://[::1"}, 403),
    ):
        response = httpx.post(
            open_server.url(),
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Accept": "application/json, text/event-stream", **headers},
            timeout=30,
        )
        assert response.status_code == status, headers
        assert response.headers["content-type"] == "application/problem+json"


def _plans_counted(served: Served, kind: str, status: str) -> float:
    line = f'toolloop_plans_total{{kind="{kind}",status="{status}"}} '
    for text in served.get("/metrics").text.splitlines():
        if text.startswith(line):
            return float(text[len(line) :])
    return 0.0


async def test_calls_are_counted_as_plans_of_kind_mcp(open_server: Served, mode: str) -> None:
    succeeded = _plans_counted(open_server, "mcp", "succeeded")
    rejected = _plans_counted(open_server, "mcp", "rejected")
    async with connected(open_server.url(), mode) as client:
        await client.call_tool("shout", {"text": "count me"})
        await client.call_tool("shout", {"text": ""})

    assert _plans_counted(open_server, "mcp", "succeeded") == succeeded + 1
    assert _plans_counted(open_server, "mcp", "rejected") == rejected + 1


def _post_call(served: Served, arguments: Any) -> httpx.Response:
    return httpx.post(
        served.url(),
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "shout", "arguments": arguments},
        },
        headers={
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-11-25",
        },
        timeout=30,
    )


def test_a_body_nested_past_the_apis_limit_is_a_problem_and_runs_nothing(
    open_server: Served, mode: str
) -> None:
    before = _mcp_runs(open_server)
    nested: Any = "deep"
    for _ in range(100):
        nested = [nested]
    too_deep = _post_call(open_server, {"text": nested})

    assert too_deep.status_code == 422
    assert too_deep.headers["content-type"] == "application/problem+json"
    assert "nests deeper than" in too_deep.json()["detail"]
    assert _mcp_runs(open_server) == before


async def test_a_call_whose_run_is_cancelled_is_an_error_result(
    open_server: Served, mode: str, tmp_path: Path
) -> None:
    async with connected(open_server.url(), mode) as client:
        call = asyncio.create_task(
            client.call_tool("wait_for_file", {"path": str(tmp_path / "never")})
        )

        def running() -> list[dict[str, Any]]:
            items: list[dict[str, Any]] = open_server.get("/runs?kind=mcp&status=running").json()[
                "items"
            ]
            assert not call.done(), call.result()
            return items

        (run,) = await wait_for(running, "the call's run is running", every_s=0.05)
        assert open_server.post(f"/runs/{run['run_id']}/cancel").status_code == 200
        result = await call

    assert result.is_error
    assert _run_id(result) == run["run_id"]
    assert "cancelled" in _text(result)
    assert open_server.get(f"/runs/{run['run_id']}").json()["status"] == "cancelled"
