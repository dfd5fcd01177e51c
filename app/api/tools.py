"""`GET /tools`: what each owner may run, as registered."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel

from app.api.auth import Caller
from app.api.deps import RuntimeDep
from app.service.catalog import describe_contract

router = APIRouter(tags=["tools"])


class ToolView(BaseModel):
    id: str
    description: str
    input_schema: Any
    output_schema: Any
    cacheable: bool
    effect: str
    timeout_s: float
    requires_confirmation: bool
    # A remote MCP tool (DESIGN §9); it is unavailable while its server's copy
    # differs from the pinned one, lacks it, or cannot be reached.
    remote: bool
    available: bool
    unavailable_reason: str | None


class RunnerDefaultsView(BaseModel):
    allowed_tools: list[str]
    max_calls: int
    tool_timeout_s: float


class OwnerView(BaseModel):
    owner: str
    tools: list[ToolView]
    runner_defaults: RunnerDefaultsView


class Catalog(BaseModel):
    contract_hash: str
    owners: list[OwnerView]


@router.get("/tools", operation_id="listTools")
async def list_tools(runtime: RuntimeDep, _: Caller) -> Catalog:
    return Catalog.model_validate(describe_contract(runtime.contract, runtime.unavailable_tools()))
