"""Probes: liveness and readiness."""

from __future__ import annotations

import logging

from fastapi import APIRouter
from pydantic import BaseModel

from app.api.deps import RuntimeDep
from app.api.problems import DATABASE_UNAVAILABLE, ServiceUnavailable

router = APIRouter(tags=["probes"])
logger = logging.getLogger("toolloop.api")


class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    status: str
    contract_hash: str
    database: str


@router.get("/healthz", operation_id="healthz")
async def healthz() -> Health:
    return Health(status="ok")


@router.get("/readyz", operation_id="readyz")
async def readyz(runtime: RuntimeDep) -> Readiness:
    problem = await runtime.database_problem()
    if problem is not None:
        logger.warning("not ready: %s", problem)
        raise ServiceUnavailable(DATABASE_UNAVAILABLE, headers={"Retry-After": "5"})
    return Readiness(
        status="ready",
        contract_hash=runtime.contract.hash,
        database=runtime.database_display,
    )
