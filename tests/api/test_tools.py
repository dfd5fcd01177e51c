from __future__ import annotations

import httpx

from app.contract import load_contract
from tests.api.conftest import EXAMPLE_REGISTRY


async def test_tools_lists_every_owner_with_schemas_and_hash(client: httpx.AsyncClient) -> None:
    contract = load_contract([EXAMPLE_REGISTRY])
    response = await client.get("/tools")
    assert response.status_code == 200
    body = response.json()
    assert body["contract_hash"] == contract.hash
    owners = {owner["owner"]: owner for owner in body["owners"]}
    assert set(owners) == set(contract.owners)
    for name, owner in contract.owners.items():
        listed = {tool["id"]: tool for tool in owners[name]["tools"]}
        assert set(listed) == set(owner.tools)
        for tool_id, tool in owner.tools.items():
            assert listed[tool_id]["description"] == tool.description
            assert listed[tool_id]["input_schema"] == dict(tool.input_schema.source)
        defaults = owners[name]["runner_defaults"]
        assert defaults["allowed_tools"] == list(owner.runner_defaults.allowed_tools)
        assert defaults["max_calls"] == owner.runner_defaults.max_calls
