"""The FastAPI application factory; resources live in the lifespan."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI

from app.api import (
    confirmations,
    documentation,
    health,
    metrics,
    plans,
    receipts,
    resume,
    router,
    run_control,
    runs,
    tools,
    usage,
)
from app.api.auth import FailedAuthThrottle, install_auth, load_keys
from app.api.collector import tune_for_serving
from app.api.console import install_console
from app.api.cors import allow_cors
from app.api.mcp import McpEndpoint
from app.api.openapi import install_openapi
from app.api.problems import install_problem_handlers
from app.api.transport_guard import TransportGuard
from app.api.waiting import runtime_when_reachable
from app.contract import Contract, load_contract
from app.observability.middleware import ObservabilityMiddleware
from app.observability.tracing import Tracing, tracing_from_environment
from app.service.plans.executor import PlanExecutor
from app.service.runtime import open_runtime
from app.settings import Settings


def create_app(
    settings: Settings | None = None,
    contract: Contract | None = None,
    *,
    tune_collector: bool = False,
    tracing: Tracing | None = None,
) -> FastAPI:
    """`tune_collector`: once started, set the garbage collector as a server process
    should (`toolloop serve`): `app.api.collector.tune_for_serving`.

    `tracing`: where spans go; by default the OTLP exporter when the standard
    `OTEL_*` variables name an endpoint, else none (`app.observability.tracing`)."""
    resolved = settings or Settings()
    if tracing is None:
        tracing = tracing_from_environment(os.environ, payloads=resolved.trace_payloads)
    mcp = McpEndpoint(
        open_mode=resolved.api_keys is None,
        max_body_bytes=resolved.max_body_bytes,
        max_json_depth=resolved.max_json_depth,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with mcp.running(), service_lifespan(app):
            yield

    @asynccontextmanager
    async def service_lifespan(app: FastAPI) -> AsyncIterator[None]:
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
        executor = await plan_executor(resolved, loaded)
        if resolved.wait_for_database_s > 0:
            try:
                async with runtime_when_reachable(app.state, resolved, loaded, tracing, executor):
                    if tune_collector:
                        tune_for_serving()
                    yield
            finally:
                await _stop_tracing(tracing)
            return
        runtime = await open_runtime(resolved, loaded, tracing, executor)
        app.state.runtime = runtime
        if tune_collector:
            tune_for_serving()
        try:
            yield
        finally:
            await runtime.aclose()
            await _stop_tracing(tracing)

    app = FastAPI(
        title="ToolLoop",
        version="0.1.0",
        summary="Governed execution of registered tools with durable receipts.",
        lifespan=lifespan,
        # FastAPI's native OpenTelemetry layer asks the global providers on every
        # request, exporting or not; the service's telemetry is its own
        # (Prometheus metrics, JSON logs: docs/decisions.md).
        telemetry={"tracing": False, "metrics": False, "logs": False},
        # Served by `app.api.documentation`, behind the API keys.
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    # The last added runs first: the request's log line and id, then the transport
    # checks, then CORS (only for the origins the operator lists).
    if resolved.cors_origins:
        allow_cors(app, resolved.cors_origins)
    app.add_middleware(TransportGuard)
    app.add_middleware(ObservabilityMiddleware)
    if tracing is not None:
        app.add_middleware(tracing.middleware)
    install_problem_handlers(app)
    install_openapi(app)
    # The busiest routes first, the documentation last: a request is matched
    # against the table in order.
    for api in (
        plans,
        router,
        runs,
        run_control,
        resume,
        confirmations,
        receipts,
        usage,
        tools,
        health,
        metrics,
    ):
        add_routes(app, api.router)
    app.router.routes.append(mcp.route())
    install_console(app)
    add_routes(app, documentation.router)
    return app


async def plan_executor(settings: Settings, contract: Contract) -> PlanExecutor | None:
    """Temporal's executor when configured (its SDK imported only then); None: local."""
    if settings.executor != "temporal":
        return None
    from app.temporal.client import open_executor
    from app.temporal.worker import settings_problem

    problem = settings_problem(settings)
    if problem is not None:
        raise ValueError(problem)
    return await open_executor(settings, contract)


async def _stop_tracing(tracing: Tracing | None) -> None:
    """Export the spans still batched, then stop the exporter."""
    if tracing is not None:
        await asyncio.to_thread(tracing.shutdown)


def add_routes(app: FastAPI, api: APIRouter) -> None:
    """Add the router's routes to the app's own table, as if declared on the app.

    Each route already carries its full path, tags and responses (the routers
    take no include options). `include_router` would keep the router as one
    entry that FastAPI matches twice per request, through a context layer per
    route, where the flat table costs one pass of a few route regexes.
    """
    app.router.routes.extend(api.routes)
