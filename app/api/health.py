"""Probes: liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from app.api.deps import RuntimeDep
from app.api.problems import ServiceUnavailable

router = APIRouter(tags=["probes"])


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
        raise ServiceUnavailable(problem, headers={"Retry-After": "5"})
    return Readiness(
        status="ready",
        contract_hash=runtime.contract.hash,
        database=runtime.database_display,
    )
