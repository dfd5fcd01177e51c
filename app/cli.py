"""`toolloop`: serve the API, run Temporal workers, migrate the database, check registries,
replay router runs."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import sys
from collections.abc import Awaitable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import orjson
from pydantic import ValidationError

from app.api.auth import KeysError, UnsafeBindError, check_open_bind, create_key, load_keys
from app.contract import Contract, RegistryError, load_contract
from app.database_command import CommandFailed, read_database, run_on_database
from app.foundation.signing import SigningKeyError
from app.serving import STARTUP_FAILURE, ServiceServer, ServingFailed
from app.settings import Settings
from app.store.database import check_database, create_database_engine, is_sqlite_url
from app.store.migrate import upgrade_database

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

    from app.service.router.backtest import BacktestReport

_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


def _settings_flags(parser: argparse.ArgumentParser, *, registries: bool = True) -> None:
    if registries:
        parser.add_argument(
            "--registry",
            dest="registries",
            action="append",
            type=Path,
            help="registry YAML file (repeatable; env TOOLLOOP_REGISTRIES, comma-separated)",
        )
        parser.add_argument(
            "--allowed-module",
            dest="allowed_modules",
            action="append",
            help="module prefix callables may come from (repeatable; env TOOLLOOP_ALLOWED_MODULES)",
        )
    parser.add_argument("--database-url", help="env TOOLLOOP_DATABASE_URL")


def _temporal_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--temporal-address", help="Temporal frontend host:port (env TOOLLOOP_TEMPORAL_ADDRESS)"
    )
    parser.add_argument(
        "--temporal-namespace", help="env TOOLLOOP_TEMPORAL_NAMESPACE, default default"
    )
    parser.add_argument(
        "--temporal-task-queue", help="env TOOLLOOP_TEMPORAL_TASK_QUEUE, default toolloop"
    )


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="toolloop", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="apply migrations and serve the HTTP API")
    _settings_flags(serve)
    serve.add_argument("--host", help="bind address (env TOOLLOOP_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (env TOOLLOOP_PORT, default 8000)")
    serve.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="worker processes serving the port, each a whole service; above 1 needs "
        "PostgreSQL (env TOOLLOOP_WORKERS, default 1)",
    )
    serve.add_argument(
        "--forwarded-allow-ips",
        metavar="ADDRESSES",
        help="comma-separated proxies (addresses or networks) whose X-Forwarded-For is "
        "believed (env TOOLLOOP_FORWARDED_ALLOW_IPS; default none: the peer is the client)",
    )
    serve.add_argument(
        "--cors-origins",
        metavar="ORIGINS",
        help="comma-separated web origins whose pages may call the API "
        "(env TOOLLOOP_CORS_ORIGINS; default none: no CORS)",
    )
    serve.add_argument("--profiles", type=Path, help="model profiles YAML (env TOOLLOOP_PROFILES)")
    serve.add_argument("--prompts-dir", type=Path, help="prompt files (env TOOLLOOP_PROMPTS_DIR)")
    serve.add_argument("--api-keys", type=Path, help="API keys file (env TOOLLOOP_API_KEYS)")
    serve.add_argument(
        "--wait-for-database",
        dest="wait_for_database_s",
        type=float,
        metavar="SECONDS",
        help="serve at once and wait up to SECONDS for the database, /readyz answering 503 "
        "meanwhile (env TOOLLOOP_WAIT_FOR_DATABASE_S; default 0: exit 1 at once)",
    )
    serve.add_argument(
        "--log-level",
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="env TOOLLOOP_LOG_LEVEL, default INFO",
    )
    serve.add_argument(
        "--log-format",
        choices=["json", "text"],
        help="json lines, or text lines for a person (env TOOLLOOP_LOG_FORMAT; default: "
        "text on a terminal, json otherwise); both redacted",
    )

    serve.add_argument(
        "--executor",
        choices=["local", "temporal"],
        help="where plans run: here, or as Temporal workflows run by `toolloop worker` "
        "processes (env TOOLLOOP_EXECUTOR, default local)",
    )
    _temporal_flags(serve)

    worker = commands.add_parser(
        "worker", help="run plans' workflows and tool calls from Temporal's task queue"
    )
    _settings_flags(worker)
    _temporal_flags(worker)

    db = commands.add_parser("db", help="database maintenance")
    db_commands = db.add_subparsers(dest="db_command", required=True)
    upgrade = db_commands.add_parser("upgrade", help="apply every migration")
    _settings_flags(upgrade, registries=False)

    keys = commands.add_parser("keys", help="API keys")
    keys_commands = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_commands.add_parser(
        "create", help="create a key: printed once, only its hash kept"
    )
    create.add_argument("name")
    create.add_argument("--scope", dest="scopes", action="append", required=True)
    create.add_argument("--api-keys", type=Path, help="keys file (env TOOLLOOP_API_KEYS)")

    router = commands.add_parser("router", help="router runs")
    router_commands = router.add_subparsers(dest="router_command", required=True)
    replay = router_commands.add_parser(
        "replay",
        help="rerun a recorded router run against its recorded replies and today's "
        "registries; print where the decisions differ (exit 4 when some do)",
    )
    replay.add_argument("source", help="a recorded run's id, or a cassette file")
    replay.add_argument(
        "--save-cassette",
        type=Path,
        metavar="PATH",
        help="write the run's cassette (JSON lines) to PATH instead of replaying it",
    )
    _settings_flags(replay)
    replay.add_argument("--profiles", type=Path, help="model profiles YAML (env TOOLLOOP_PROFILES)")
    replay.add_argument("--prompts-dir", type=Path, help="prompt files (env TOOLLOOP_PROMPTS_DIR)")

    policy = commands.add_parser("policy", help="guardrails over stored calls")
    policy_commands = policy.add_subparsers(dest="policy_command", required=True)
    backtest = policy_commands.add_parser(
        "backtest", help="run a guardrail over stored router calls: what it would have denied"
    )
    _settings_flags(backtest)
    backtest.add_argument("--guardrail", required=True, help="a guardrail of the registries")
    backtest.add_argument("--since", required=True, type=_instant, help="RFC 3339, inclusive")
    backtest.add_argument("--until", type=_instant, help="RFC 3339, exclusive (default: now)")
    backtest.add_argument(
        "--timeout-s", type=float, default=5.0, help="per call of the guardrail (default 5)"
    )
    backtest.add_argument("--json", action="store_true", help="print the report as JSON")

    registry = commands.add_parser("registry", help="registry tools for App authors")
    registry_commands = registry.add_subparsers(dest="registry_command", required=True)
    check = registry_commands.add_parser("check", help="validate registries, print the hash")
    check.add_argument("paths", nargs="+", type=Path)
    check.add_argument("--allowed-module", dest="allowed_modules", action="append")
    imported = registry_commands.add_parser(
        "import-mcp", help="print registry YAML pinning an MCP server's tools, to review"
    )
    imported.add_argument("url", help="the server's Streamable HTTP endpoint")
    imported.add_argument("--owner", help="owner name (default: the server's name)")
    imported.add_argument(
        "--token-env", help="environment variable holding the server's bearer token"
    )
    imported.add_argument(
        "--tool-timeout-s", type=float, default=30.0, help="runner_defaults.tool_timeout_s"
    )
    imported.add_argument(
        "--max-calls", type=int, help="runner_defaults.max_calls (default: the tool count)"
    )
    imported.add_argument(
        "--timeout-s", type=float, default=30.0, help="how long to wait for the server"
    )
    _audit_commands(commands)
    return parser


def _audit_commands(commands: Any) -> None:
    from app.audit_verify_command import add_arguments

    audit = commands.add_parser("audit", help="the tamper-evident receipt log")
    audit_commands = audit.add_subparsers(dest="audit_command", required=True)
    export = audit_commands.add_parser(
        "export",
        help="write a run's chained receipts and audit rows, or those of the runs created "
        "in a window, with their checkpoints, to a bundle (JSON lines)",
    )
    export.add_argument("run_id", nargs="?", help="the run to export")
    export.add_argument("--since", type=_instant, help="runs created at or after (RFC 3339)")
    export.add_argument("--until", type=_instant, help="runs created before (RFC 3339)")
    export.add_argument("--out", type=Path, required=True, metavar="FILE", help="the bundle")
    _settings_flags(export, registries=False)
    verify = audit_commands.add_parser(
        "verify",
        help="check a bundle offline, with no database: exit 0 intact, 1 problems found, "
        "2 unreadable",
    )
    add_arguments(verify)


def _instant(value: str) -> datetime:
    if _RFC3339.fullmatch(value) is None:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an RFC 3339 date-time with an offset, e.g. 2026-01-01T00:00:00Z"
        )
    return datetime.fromisoformat(value).astimezone(UTC)


def _settings(args: argparse.Namespace) -> Settings:
    keys = (
        "registries",
        "allowed_modules",
        "database_url",
        "host",
        "port",
        "workers",
        "forwarded_allow_ips",
        "cors_origins",
        "profiles",
        "api_keys",
        "log_level",
        "log_format",
        "wait_for_database_s",
        "executor",
        "temporal_address",
        "temporal_namespace",
        "temporal_task_queue",
    )
    overrides: dict[str, Any] = {
        key: getattr(args, key) for key in keys if getattr(args, key, None) is not None
    }
    if getattr(args, "prompts_dir", None) is not None:
        overrides["prompts_dir"] = args.prompts_dir
    return Settings(**overrides)


def _fail(message: str) -> int:
    print(f"toolloop: {message}", file=sys.stderr)
    return 1


def _load(settings: Settings) -> Contract | None:
    if not settings.registries:
        _fail("no registry given: use --registry PATH or TOOLLOOP_REGISTRIES")
        return None
    try:
        return load_contract(settings.registries, settings.allowed_modules)
    except RegistryError as exc:
        for line in exc.lines():
            print(f"toolloop: {line}", file=sys.stderr)
        _fail(f"refusing to start: {len(exc.problems)} registry problem(s)")
        return None


async def _prepare_database(url: str) -> None:
    engine = create_database_engine(url)
    try:
        await check_database(engine)
    finally:
        await engine.dispose()
    await upgrade_database(url)


def _serve(settings: Settings) -> int:
    from app.observability.logging import configure_logging
    from app.service.runtime import checkpoint_signer

    if settings.workers > 1 and is_sqlite_url(settings.database_url):
        return _fail(
            f"refusing to start: --workers {settings.workers} needs PostgreSQL; SQLite takes "
            "writes from one process at a time, so on SQLite the service runs as one process"
        )
    try:
        check_open_bind(settings.host, settings.api_keys is not None)
        if settings.api_keys is not None:
            load_keys(settings.api_keys)
        checkpoint_signer(settings)
    except (UnsafeBindError, KeysError, SigningKeyError) as exc:
        return _fail(f"refusing to start: {exc}")
    if settings.executor == "temporal":
        problem = _temporal_problem(settings)
        if problem is not None:
            return _fail(f"refusing to start: {problem}")
    contract = _load(settings)
    if contract is None:
        return 1
    configure_logging(settings.log_level, settings.log_format)
    if not settings.wait_for_database_s:
        # Once, before any worker starts: the workers then find the database at the head.
        try:
            run_on_database(settings.database_url, _prepare_database(settings.database_url))
        except CommandFailed as exc:
            return _fail(str(exc))
    try:
        if settings.workers > 1:
            from app.workers import serve_workers

            status = serve_workers(settings)
            if status == STARTUP_FAILURE:
                _fail("a worker failed to start (its reason is above); every worker stopped")
            return status
        return ServiceServer(settings, contract).run()
    except ServingFailed as exc:
        return _fail(str(exc))


def _temporal_problem(settings: Settings) -> str | None:
    """Why plans cannot run on Temporal with these settings (its SDK missing included)."""
    try:
        from app.temporal.worker import settings_problem
    except ImportError:
        return "the temporal executor needs the temporal extra: pip install 'toolloop[temporal]'"
    return settings_problem(settings)


def _worker(settings: Settings) -> int:
    from app.observability.logging import configure_logging

    problem = _temporal_problem(settings)
    if problem is not None:
        return _fail(f"refusing to start: {problem}")
    contract = _load(settings)
    if contract is None:
        return 1
    configure_logging(settings.log_level, settings.log_format)
    from app.temporal.worker import serve_worker

    status = 0
    try:
        run_on_database(settings.database_url, serve_worker(settings, contract))
    except CommandFailed as exc:
        status = _fail(str(exc))
    except RuntimeError as exc:  # the SDK's words when Temporal cannot be reached
        status = _fail(f"Temporal at {settings.temporal_address} cannot be reached: {exc}")
    return _exit_without_teardown(status)


def _exit_without_teardown(status: int) -> NoReturn:
    """End the process without the interpreter's teardown. The Temporal SDK's core
    threads outlive its client, and one still handing a result to Python while the
    interpreter finalizes aborts the process ("PyGILState_Release", SIGABRT)."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _db_upgrade(settings: Settings) -> int:
    try:
        run_on_database(settings.database_url, _prepare_database(settings.database_url))
    except CommandFailed as exc:
        return _fail(str(exc))
    print("database is at the latest migration", file=sys.stderr)
    return 0


def _registry_check(paths: Sequence[Path], allowed_modules: Sequence[str] | None) -> int:
    try:
        contract = load_contract(paths, allowed_modules)
    except RegistryError as exc:
        for line in exc.lines():
            print(line)
        print(f"{len(exc.problems)} problem(s)", file=sys.stderr)
        return 1
    print(contract.hash)
    return 0


def _registry_import_mcp(args: argparse.Namespace) -> int:
    from app.registry_import import import_mcp_tools

    for noisy in ("httpx2", "mcp"):  # a line per request: stderr is for problems here
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        text = asyncio.run(
            import_mcp_tools(
                args.url,
                owner=args.owner,
                token_env=args.token_env,
                timeout_s=args.timeout_s,
                tool_timeout_s=args.tool_timeout_s,
                max_calls=args.max_calls,
                warn=lambda message: print(f"toolloop: {message}", file=sys.stderr),
            )
        )
    except Exception as exc:
        return _fail(f"cannot list the MCP server's tools: {_first_cause(exc)}")
    print(text, end="")
    return 0


def _first_cause(exc: BaseException) -> str:
    """The innermost error of an exception group (the SDK raises them), named."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _router_replay(settings: Settings, source: str, save_to: Path | None) -> int:
    from app.replay_command import print_result, replay, save_cassette

    url = settings.database_url
    try:
        if save_to is not None:
            status, text = run_on_database(url, save_cassette(settings, source, save_to))
            return print_result(status, text, to_stdout=False)
        contract = _load(settings)
        if contract is None:
            return 1
        status, text = run_on_database(url, replay(settings, contract, source))
    except CommandFailed as exc:
        return _fail(str(exc))
    return print_result(status, text, to_stdout=True)


def _policy_backtest(settings: Settings, args: argparse.Namespace) -> int:
    from app.service.router.backtest import backtest

    contract = _load(settings)
    if contract is None:
        return 1
    guardrail = contract.guardrails.get(args.guardrail)
    if guardrail is None:
        known = ", ".join(sorted(contract.guardrails)) or "none"
        return _fail(f"unknown guardrail {args.guardrail!r} (the registries declare: {known})")

    def over(sessions: async_sessionmaker[AsyncSession]) -> Awaitable[BacktestReport]:
        return backtest(
            sessions, guardrail, since=args.since, until=args.until, timeout_s=args.timeout_s
        )

    url = settings.database_url
    try:
        report = run_on_database(url, read_database(url, over))
    except CommandFailed as exc:
        return _fail(str(exc))
    if args.json:
        print(orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2).decode())
        return 0
    print(
        f"{report.guardrail}: {report.calls} call(s), would deny {len(report.denied)}, "
        f"failed on {len(report.failed)}, {report.unreadable} unreadable"
    )
    for label, findings in (("denied", report.denied), ("failed", report.failed)):
        for finding in findings:
            print(
                f"{label}\t{finding.run_id}\t{finding.call_key}\t{finding.tool}\t{finding.reason}"
            )
    return 0


def _audit_export(settings: Settings, args: argparse.Namespace) -> int:
    from app.audit_export_command import export
    from app.service.evidence.export import RunSelection, Selection, WindowSelection

    if (args.run_id is None) == (args.since is None):
        return _fail("audit export takes a RUN_ID or --since, one of them")
    if args.until is not None and args.since is None:
        return _fail("--until goes with --since")
    selection: Selection = (
        RunSelection(args.run_id)
        if args.run_id is not None
        else WindowSelection(args.since, args.until)
    )

    def over(sessions: async_sessionmaker[AsyncSession]) -> Awaitable[tuple[int, str]]:
        return export(sessions, selection, args.out)

    url = settings.database_url
    try:
        status, text = run_on_database(url, read_database(url, over))
    except CommandFailed as exc:
        return _fail(str(exc))
    if status != 0:
        return _fail(text)
    print(text, file=sys.stderr)
    return 0


def _keys_create(settings: Settings, name: str, scopes: Sequence[str]) -> int:
    if settings.api_keys is None:
        return _fail("no keys file: use --api-keys PATH or TOOLLOOP_API_KEYS")
    try:
        key = create_key(settings.api_keys, name, scopes)
    except KeysError as exc:
        return _fail(str(exc))
    print(key)
    print(f"created key {name!r}; only its hash is stored in {settings.api_keys}", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    args = _build_parser().parse_args(argv)
    if args.command == "registry" and args.registry_command == "import-mcp":
        return _registry_import_mcp(args)
    if args.command == "registry":
        return _registry_check(args.paths, args.allowed_modules)
    if args.command == "audit" and args.audit_command == "verify":
        from app.audit_verify_command import run

        return run(args)
    try:
        settings = _settings(args)
    except ValidationError as exc:
        return _fail(f"invalid settings: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}")
    if args.command == "serve":
        return _serve(settings)
    if args.command == "worker":
        return _worker(settings)
    if args.command == "keys":
        return _keys_create(settings, args.name, args.scopes)
    if args.command == "router":
        return _router_replay(settings, args.source, args.save_cassette)
    if args.command == "policy":
        return _policy_backtest(settings, args)
    if args.command == "audit":
        return _audit_export(settings, args)
    return _db_upgrade(settings)


if __name__ == "__main__":
    sys.exit(main())
