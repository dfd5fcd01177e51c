"""The HTTP floor: a bare FastAPI POST endpoint taking and returning JSON."""

from __future__ import annotations

from typing import Any

from fastapi import Body, FastAPI

app = FastAPI()


@app.post("/plans/sequential")
async def plan(payload: dict[str, Any] = Body(...)) -> dict[str, Any]:  # noqa: B008
    return {"plan_id": "floor", "status": "succeeded", "calls": len(payload.get("calls", ()))}


@app.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}
