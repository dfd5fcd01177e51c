"""Service settings: `TOOLLOOP_*` environment variables, mirrored by `toolloop` CLI flags."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

PACKAGED_PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"


def _default_database_url() -> str:
    return f"sqlite+aiosqlite:///{Path.cwd() / 'toolloop.db'}"


def _split_commas(value: Any) -> Any:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TOOLLOOP_", extra="ignore", frozen=True)

    registries: Annotated[list[Path], NoDecode] = Field(default_factory=list)
    database_url: str = Field(default_factory=_default_database_url)
    profiles: Path | None = None
    prompts_dir: Path = PACKAGED_PROMPTS_DIR
    allowed_modules: Annotated[list[str] | None, NoDecode] = None
    api_keys: Path | None = None
    auth_failure_burst: int = Field(default=10, gt=0)
    auth_failures_per_minute: float = Field(default=10.0, gt=0)
    host: str = "127.0.0.1"
    # The proxies whose X-Forwarded-For / X-Forwarded-Proto are believed (addresses or
    # networks; "*" any). Empty: none, the TCP peer is the client (auth throttle, logs).
    forwarded_allow_ips: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Web origins (scheme://host[:port]) whose pages may call the API (CORS). Empty: none.
    cors_origins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    port: int = Field(default=8000, ge=1, le=65535)
    # Server processes sharing the port (`toolloop serve --workers`); above 1 needs PostgreSQL.
    workers: int = Field(default=1, ge=1)

    max_body_bytes: int = Field(default=16 * 1024 * 1024, gt=0)
    max_json_depth: int = Field(default=64, gt=0)
    max_sequential_calls: int = Field(default=1000, gt=0)
    max_lanes: int = Field(default=10_000, gt=0)
    max_calls_per_lane: int = Field(default=100, gt=0)
    max_concurrency_cap: int = Field(default=1000, gt=0)
    worker_threads: int = Field(default=32, gt=0)
    # HTTP connections one remote MCP server's session may hold open at once.
    mcp_max_connections: int = Field(default=16, gt=0)
    # Larger outputs are stored truncated, with their digest; the response keeps them whole.
    max_stored_output_bytes: int = Field(default=1024 * 1024, ge=1024)
    # How long a commit waits for more rows; None: none when SQLite's commits go
    # to the writer process, 2 ms otherwise (`app.service.runtime.commit_linger_s`).
    group_commit_linger_s: float | None = Field(default=None, ge=0)
    # The linger is spent only while this many runs (or more) are open.
    group_commit_linger_min_open_runs: int = Field(default=5, ge=2)
    # SQLite files: passive WAL checkpoints from a thread of their own, this often
    # (0: none; commits then checkpoint every 1,000 pages, SQLite's default). Past
    # `sqlite_wal_long_pages` the writer waits for one pass so the WAL starts over;
    # past twice that, a commit checkpoints itself (app.store.journal.sqlite.checkpoints).
    sqlite_checkpoint_interval_s: float = Field(default=0.05, ge=0)
    # While no commit of the receipt writer comes, a pass this often (for writes
    # made elsewhere: heartbeats, maintenance); never more often than the above.
    sqlite_checkpoint_idle_interval_s: float = Field(default=1.0, gt=0)
    sqlite_wal_long_pages: int = Field(default=10_000, ge=500)
    # SQLite files: the group commit's transactions are written by a process of
    # their own (app.store.journal.sqlite.process); off, by a thread of this one.
    sqlite_writer_process: bool = True
    # PostgreSQL: the group commit's transactions are written by a process of their
    # own (app.store.journal.postgres.process); off, on the event loop through a connection.
    postgres_writer_process: bool = True
    # The receipt log's hash chain: a checkpoint of ended runs' heads once this many
    # runs ended since the last one (and on the first end of a new UTC day, and at
    # shutdown), signed with this Ed25519 private key (PEM, PKCS8) when one is named.
    chain_checkpoint_runs: int = Field(default=100, ge=1)
    checkpoint_signing_key: str | None = None
    heartbeat_interval_s: float = Field(default=5.0, gt=0)
    instance_stale_after_s: float = Field(default=20.0, gt=0)
    # 0: a database that does not answer at start is a one-line error and exit 1.
    wait_for_database_s: float = Field(default=0.0, ge=0)
    # Idempotency keys are kept at least 24 hours (the floor), then purged.
    idempotency_ttl_s: float = Field(default=86_400.0, ge=86_400.0)
    idempotency_purge_interval_s: float = Field(default=600.0, gt=0)
    # A call waiting for a confirmation nobody gave is rejected (`expired`) after this.
    confirmation_ttl_s: float = Field(default=86_400.0, gt=0)
    confirmation_expiry_interval_s: float = Field(default=60.0, gt=0)
    run_events_heartbeat_s: float = Field(default=15.0, gt=0)
    run_events_poll_s: float = Field(default=1.0, gt=0)
    # PostgreSQL: how long a cancel waits for the process executing the run to confirm it.
    run_cancel_wait_s: float = Field(default=10.0, gt=0)
    # SIGTERM: how long open requests and event streams get to finish before they are
    # cancelled and the service stops (runs still going end `interrupted` at once).
    shutdown_grace_s: float = Field(default=10.0, ge=0)

    # Where plans run: `local` (in this process) or `temporal` (as Temporal workflows,
    # each call an activity of a `toolloop worker` process; app.temporal).
    executor: Literal["local", "temporal"] = "local"
    temporal_address: str | None = None  # host:port of the Temporal frontend
    temporal_namespace: str = "default"
    temporal_task_queue: str = "toolloop"
    # A worker that stops heartbeating a call this long is taken as gone (the call is
    # then retried elsewhere, as its effect allows).
    temporal_heartbeat_timeout_s: float = Field(default=10.0, gt=0)

    # Router runs: server limits, not App semantics. Request budgets may only narrow them.
    router_max_turns: int = Field(default=16, gt=0)
    router_deadline_s: float = Field(default=600.0, gt=0)
    router_max_tokens: int | None = Field(default=None, gt=0)
    router_max_completion_attempts: int = Field(default=5, gt=0)
    router_max_steps: int = Field(default=100, gt=0)
    router_max_goal_chars: int = Field(default=100_000, gt=0)
    router_max_observation_chars: int = Field(default=4000, ge=200)
    router_max_malformed_outputs: int = Field(default=3, ge=0)
    router_max_duplicate_calls: int = Field(default=1, ge=0)
    router_max_budget_breaches: int = Field(default=1, ge=0)
    router_max_same_tool_streak: int = Field(default=8, gt=0)
    router_final_attempts: int = Field(default=2, gt=0)
    router_max_parallel_calls: int = Field(default=8, gt=0)
    router_policy_timeout_s: float = Field(default=10.0, gt=0)
    llm_max_attempts: int = Field(default=4, gt=0)
    llm_backoff_s: float = Field(default=1.0, ge=0)
    llm_backoff_max_s: float = Field(default=16.0, ge=0)
    llm_retry_after_max_s: float = Field(default=60.0, ge=0)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    # None: readable lines when stderr is a terminal, JSON lines otherwise.
    log_format: Literal["json", "text"] | None = None
    # With tracing on (OTEL_EXPORTER_OTLP_ENDPOINT): put call arguments and outputs
    # on the spans, redacted as the stored receipts are.
    trace_payloads: bool = False

    @field_validator(
        "registries", "allowed_modules", "forwarded_allow_ips", "cors_origins", mode="before"
    )
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        return _split_commas(value)
