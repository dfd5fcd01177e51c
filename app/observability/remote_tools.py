"""Metrics of remote (MCP) tools: availability and failed pin checks."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

from app.observability.metrics import REGISTRY

REMOTE_TOOL_AVAILABLE = Gauge(
    "toolloop_remote_tool_available",
    "1 while a remote MCP tool matches its pins and its server answered; 0 while unavailable.",
    ["tool"],
    multiprocess_mode="liveall",
    registry=REGISTRY,
)
REMOTE_TOOL_UNAVAILABLE = Counter(
    "toolloop_remote_tool_unavailable_total",
    "Times a remote MCP tool became unavailable, by reason (missing, changed, unreachable).",
    ["tool", "reason"],
    registry=REGISTRY,
)


def record_status(tool_id: str, reason: str | None) -> None:
    REMOTE_TOOL_AVAILABLE.labels(tool_id).set(0 if reason is not None else 1)
    if reason is not None:
        REMOTE_TOOL_UNAVAILABLE.labels(tool_id, reason).inc()
