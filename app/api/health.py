"""Probes: liveness and readiness.

Readiness says whether the database answers (and the executor: Temporal, when
configured), never where it is (URL, host, file path) nor the driver's words:
those go to the log.
"""

from __future__ import annotations

import logging

from fastapi import APIRouter
from pydantic import BaseModel

from app.api.deps import RuntimeDep
from app.service.errors import DATABASE_UNAVAILABLE, EXECUTOR_UNAVAILABLE, ServiceUnavailable

logger = logging.getLogger("toolloop.api.health")

router = APIRouter(tags=["probes"])

DATABASE_ANSWERS = "answers"


class Health(BaseModel):
    status: str


class UnavailableTool(BaseModel):
    tool: str
    reason: str


class Readiness(BaseModel):
    status: str
    contract_hash: str
    database: str
    # Remote MCP tools that cannot be called now. Listed, not failing readiness:
    # every other tool still serves (docs/decisions.md).
    unavailable_tools: list[UnavailableTool]


@router.get("/healthz", operation_id="healthz")
async def healthz() -> Health:
    return Health(status="ok")


@router.get("/readyz", operation_id="readyz")
async def readyz(runtime: RuntimeDep) -> Readiness:
    problem = await runtime.database_problem()
    if problem is not None:
        logger.warning("not ready: %s", problem)
        raise ServiceUnavailable(DATABASE_UNAVAILABLE, retry_after_s=5)
    problem = await runtime.executor_problem()
    if problem is not None:
        logger.warning("not ready: %s", problem)
        raise ServiceUnavailable(EXECUTOR_UNAVAILABLE, retry_after_s=5)
    return Readiness(
        status="ready",
        contract_hash=runtime.contract.hash,
        database=DATABASE_ANSWERS,
        unavailable_tools=[
            UnavailableTool(tool=tool, reason=reason)
            for tool, reason in runtime.unavailable_tools().items()
        ],
    )
