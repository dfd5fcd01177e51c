"""`GET /metrics`: Prometheus exposition (the `metrics:read` scope when keys are configured)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from app.api.auth import MetricsReader
from app.observability.exposition import render_metrics

router = APIRouter(tags=["operations"])


@router.get(
    "/metrics",
    operation_id="metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format."}},
)
async def metrics(request: Request, _: MetricsReader) -> Response:
    # Multiprocess mode reads every worker's files: keep that off the event loop.
    body, content_type = await run_in_threadpool(render_metrics, request.headers.get("accept"))
    return Response(body, media_type=content_type)
