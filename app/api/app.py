"""The FastAPI application factory; resources live in the lifespan."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app.api import health, metrics, plans, receipts, resume, router, run_control, runs, tools
from app.api.auth import FailedAuthThrottle, install_auth, load_keys
from app.api.openapi import install_openapi
from app.api.problems import install_problem_handlers
from app.api.waiting import runtime_when_reachable
from app.contract import Contract, load_contract
from app.observability.middleware import ObservabilityMiddleware
from app.service.runtime import open_runtime
from app.settings import Settings


def create_app(settings: Settings | None = None, contract: Contract | None = None) -> FastAPI:
    resolved = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        loaded = contract or load_contract(resolved.registries, resolved.allowed_modules)
        keyring = load_keys(resolved.api_keys) if resolved.api_keys is not None else None
        install_auth(
            app,
            keyring,
            FailedAuthThrottle(
                burst=resolved.auth_failure_burst,
                per_minute=resolved.auth_failures_per_minute,
            ),
        )
        if resolved.wait_for_database_s > 0:
            async with runtime_when_reachable(app.state, resolved, loaded):
                yield
            return
        runtime = await open_runtime(resolved, loaded)
        app.state.runtime = runtime
        try:
            yield
        finally:
            await runtime.aclose()

    app = FastAPI(
        title="ToolLoop",
        version="0.1.0",
        summary="Governed execution of registered tools with durable receipts.",
        lifespan=lifespan,
    )
    app.add_middleware(ObservabilityMiddleware)
    install_problem_handlers(app)
    install_openapi(app)
    app.include_router(health.router)
    app.include_router(metrics.router)
    app.include_router(tools.router)
    app.include_router(plans.router)
    app.include_router(router.router)
    app.include_router(runs.router)
    app.include_router(run_control.router)
    app.include_router(resume.router)
    app.include_router(receipts.router)
    return app
