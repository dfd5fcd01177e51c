"""Every metric the service exports, in one registry; all names start with `toolloop_`.

Labels are bounded by construction: tool and owner are the contract's own
names, statuses, kinds and reasons come from closed enums, routes are
templates. Nothing a caller types (keys, run ids, arguments) becomes a label.

With `PROMETHEUS_MULTIPROC_DIR` set before this module is imported, values
live in per-process files that `exposition` merges (several workers); gauges
then sum over live processes.
"""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector

MULTIPROCESS_DIR = os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None

REGISTRY = CollectorRegistry(auto_describe=True)
if MULTIPROCESS_DIR is None:
    ProcessCollector(namespace="toolloop", registry=REGISTRY)

_CALL_SECONDS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
_WAIT_SECONDS = (0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_HTTP_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
_LLM_SECONDS = (0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120)
_WRITE_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
_BATCH_SIZES = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)

# Calls, from the engine's receipts and audit events (`calls.MeteredSinks`).
CALLS = Counter(
    "toolloop_calls_total",
    "Calls settled, by tool, owner and receipt status.",
    ["tool", "owner", "status"],
    registry=REGISTRY,
)
CALL_ERRORS = Counter(
    "toolloop_call_errors_total",
    "Calls that ended with an error, by tool and error kind.",
    ["tool", "kind"],
    registry=REGISTRY,
)
CALL_DURATION = Histogram(
    "toolloop_call_duration_seconds",
    "Call duration from first gate to receipt, skipped calls excluded.",
    ["tool"],
    buckets=_CALL_SECONDS,
    registry=REGISTRY,
)
ADMISSION_WAIT = Histogram(
    "toolloop_call_admission_wait_seconds",
    "Time a started call waited for its tool's concurrency and rate limits.",
    ["tool"],
    buckets=_WAIT_SECONDS,
    registry=REGISTRY,
)
CALLS_IN_FLIGHT = Gauge(
    "toolloop_calls_in_flight",
    "Calls started and not yet settled.",
    ["tool"],
    multiprocess_mode="livesum",
    registry=REGISTRY,
)
CACHE_HITS = Counter(
    "toolloop_cache_hits_total",
    "Calls of cacheable tools answered from the cache.",
    ["tool"],
    registry=REGISTRY,
)
CACHE_MISSES = Counter(
    "toolloop_cache_misses_total",
    "Calls of cacheable tools that found no usable cache entry and ran.",
    ["tool"],
    registry=REGISTRY,
)
RETRIES = Counter(
    "toolloop_call_retries_total",
    "Attempts retried after a retryable failure.",
    ["tool"],
    registry=REGISTRY,
)
TIMEOUTS = Counter(
    "toolloop_call_timeouts_total",
    "Attempts stopped by the watchdog (tool timeout or plan deadline).",
    ["tool"],
    registry=REGISTRY,
)
AUDIT_EVENTS = Counter(
    "toolloop_audit_events_total",
    "Audit events emitted by the engine, by kind.",
    ["kind"],
    registry=REGISTRY,
)

# Plans (`plans`).
PLANS = Counter(
    "toolloop_plans_total",
    "Plans by kind and outcome: rejected, succeeded, failed, cancelled, interrupted.",
    ["kind", "status"],
    registry=REGISTRY,
)
PREFLIGHT_REJECTIONS = Counter(
    "toolloop_preflight_rejections_total",
    "Rejected plans by problem category; a plan counts once per category it shows.",
    ["kind", "reason"],
    registry=REGISTRY,
)

# Calls waiting for a person (`confirmations`), in plan and router runs.
CONFIRMATIONS = Counter(
    "toolloop_confirmations_total",
    "Confirmations by event: requested, approved, rejected, expired, refused.",
    ["event"],
    registry=REGISTRY,
)

# The router and its model requests (`router`).
ROUTER_RUNS = Counter(
    "toolloop_router_runs_total",
    "Router runs finished, by status.",
    ["status"],
    registry=REGISTRY,
)
ROUTER_TURNS = Counter(
    "toolloop_router_turns_total",
    "Router turns (one model decision each), by model profile.",
    ["profile"],
    registry=REGISTRY,
)
ROUTER_STOPS = Counter(
    "toolloop_router_stops_total",
    "Router runs that stopped before done, by reason.",
    ["reason"],
    registry=REGISTRY,
)
GUARDRAIL_SHADOW = Counter(
    "toolloop_guardrail_shadow_total",
    "Calls a shadow guardrail would have denied (denied) or could not judge (failed: it "
    "raised, timed out or answered outside its contract); none was refused.",
    ["guardrail", "outcome"],
    registry=REGISTRY,
)
LLM_REQUESTS = Counter(
    "toolloop_llm_requests_total",
    "Model requests by profile and outcome (ok or an error category).",
    ["profile", "outcome"],
    registry=REGISTRY,
)
LLM_DURATION = Histogram(
    "toolloop_llm_request_duration_seconds",
    "Model request latency including the client's retries, by profile.",
    ["profile"],
    buckets=_LLM_SECONDS,
    registry=REGISTRY,
)
LLM_TOKENS = Counter(
    "toolloop_llm_tokens_total",
    "Tokens reported by the provider, by profile and direction (input or output).",
    ["profile", "direction"],
    registry=REGISTRY,
)
LLM_COST = Counter(
    "toolloop_llm_cost_total",
    "Cost of model requests whose profile declares prices, in the prices' unit, by profile "
    "(the usage ledger, GET /usage, holds the exact amounts).",
    ["profile"],
    registry=REGISTRY,
)

# HTTP (`middleware`).
HTTP_REQUESTS = Counter(
    "toolloop_http_requests_total",
    "HTTP requests by method, route template and status class.",
    ["method", "route", "status_class"],
    registry=REGISTRY,
)
HTTP_DURATION = Histogram(
    "toolloop_http_request_duration_seconds",
    "HTTP request latency by method and route template.",
    ["method", "route"],
    buckets=_HTTP_SECONDS,
    registry=REGISTRY,
)
HTTP_IN_FLIGHT = Gauge(
    "toolloop_http_requests_in_flight",
    "HTTP requests being served.",
    multiprocess_mode="livesum",
    registry=REGISTRY,
)

# The group-commit receipt writer (`receipts`).
RECEIPT_WRITE = Histogram(
    "toolloop_receipt_write_seconds",
    "Duration of one group commit of receipts, cache entries and audit events.",
    buckets=_WRITE_SECONDS,
    registry=REGISTRY,
)
RECEIPT_BATCH = Histogram(
    "toolloop_receipt_write_batch_size",
    "Receipts per group commit.",
    buckets=_BATCH_SIZES,
    registry=REGISTRY,
)
RECEIPT_WAL_WAIT = Histogram(
    "toolloop_receipt_wal_wait_seconds",
    "Time the receipt writer waited for a SQLite WAL checkpoint before a group commit.",
    buckets=_WRITE_SECONDS,
    registry=REGISTRY,
)
RECEIPT_WRITE_FAILURES = Counter(
    "toolloop_receipt_write_failures_total",
    "Group commits that failed; their plans answer 503.",
    registry=REGISTRY,
)
SQLITE_WRITER_STARTS = Counter(
    "toolloop_sqlite_writer_starts_total",
    "SQLite writer processes started: one per service, more when one ended and was replaced.",
    registry=REGISTRY,
)
POSTGRES_WRITER_STARTS = Counter(
    "toolloop_postgres_writer_starts_total",
    "PostgreSQL writer processes started: one per service, more when one ended and was replaced.",
    registry=REGISTRY,
)
