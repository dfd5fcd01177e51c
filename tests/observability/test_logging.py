"""JSON log lines: one object per line, context bound, redacted at the formatter."""

from __future__ import annotations

import asyncio
import io
import logging
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from app.observability import middleware
from app.observability.context import LogContext, bind_run, enter_context, leave_context
from app.observability.logging import (
    ACCESS_LOGGER,
    UVICORN_LOGGERS,
    JsonFormatter,
    RedactingTextFormatter,
    _timestamp,
    build_handler,
    configure_logging,
    own_json_handler,
)
from app.settings import Settings
from tests.observability.conftest import bearer, serving
from tests.observability.registry import OWNER

SECRET = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2"


def _lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in stream.getvalue().splitlines() if line]


def _record(message: str, *args: Any, **extra: Any) -> logging.LogRecord:
    record = logging.LogRecord("toolloop.test", logging.INFO, __file__, 1, message, args, None)
    record.__dict__.update(extra)
    return record


def test_a_line_is_one_json_object_with_the_standard_fields() -> None:
    line = orjson.loads(JsonFormatter().format(_record("hello %s", "world", answer=42)))

    assert line["message"] == "hello world"
    assert line["level"] == "INFO"
    assert line["logger"] == "toolloop.test"
    assert line["answer"] == 42
    assert line["ts"].endswith("+00:00")
    assert {"request_id", "run_id", "caller"} <= line.keys()


def test_the_bound_context_is_on_every_line() -> None:
    token = enter_context(LogContext(request_id="req-1"))
    try:
        bind_run("run-1", "alice")
        line = orjson.loads(JsonFormatter().format(_record("x")))
    finally:
        leave_context(token)

    assert (line["request_id"], line["run_id"], line["caller"]) == ("req-1", "run-1", "alice")


def test_the_caller_comes_from_the_request_principal_when_not_bound() -> None:
    class Principal:
        name = "bob"

    token = enter_context(LogContext(request_id="r", request_state={"principal": Principal()}))
    try:
        line = orjson.loads(JsonFormatter().format(_record("x")))
    finally:
        leave_context(token)

    assert line["caller"] == "bob"


def test_message_arguments_extras_and_exceptions_are_redacted() -> None:
    try:
        raise RuntimeError(f"boom {SECRET}")
    except RuntimeError:
        record = logging.LogRecord(
            "t", logging.ERROR, __file__, 1, "got %s", (SECRET,), exc_info=sys.exc_info()
        )
    record.__dict__.update(
        header=f"Bearer {SECRET}", nested={"k": [SECRET]}, obj=object(), **{SECRET: 1}
    )

    text = JsonFormatter().format(record)

    assert SECRET not in text
    line = orjson.loads(text)
    assert line["message"] == "got [REDACTED]"
    assert "RuntimeError: boom [REDACTED]" in line["exc"]
    assert line["nested"] == {"k": ["[REDACTED]"]}


def test_a_bad_format_call_is_still_redacted() -> None:
    text = JsonFormatter().format(_record(f"oops {SECRET} %s %s", "only one"))

    assert SECRET not in text
    assert "did not match" in orjson.loads(text)["message"]


def test_the_text_format_is_redacted_too() -> None:
    text = RedactingTextFormatter().format(_record("key=%s", SECRET))

    assert SECRET not in text
    assert "key=[REDACTED]" in text


def test_configure_logging_routes_everything_through_one_handler() -> None:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    stream = io.StringIO()
    try:
        handler = configure_logging("warning", "json", stream)
        logging.getLogger("uvicorn.error").warning("uvicorn says %s", SECRET)
        logging.getLogger("toolloop.any").info("below the level")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])

    assert root.level == saved[1]
    assert handler not in root.handlers
    assert all(logging.getLogger(name).propagate for name in UVICORN_LOGGERS)
    lines = _lines(stream)
    assert [line["message"] for line in lines] == ["uvicorn says [REDACTED]"]


def test_configured_records_skip_the_thread_and_process_lookups(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for flag in ("logThreads", "logProcesses", "logMultiprocessing"):
        monkeypatch.setattr(logging, flag, True)  # restored afterwards
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    stream = io.StringIO()
    try:
        configure_logging("info", "json", stream)
        record = logging.getLogger("toolloop.any").makeRecord(
            "toolloop.any", logging.INFO, __file__, 1, "x", (), None
        )
        logging.getLogger("toolloop.any").handle(record)
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])

    assert (record.thread, record.threadName, record.process, record.processName) == (
        None,
        None,
        None,
        None,
    )
    [line] = _lines(stream)
    assert set(line) == {"ts", "level", "logger", "message", "request_id", "run_id", "caller"}


def test_build_handler_writes_to_the_given_stream() -> None:
    stream = io.StringIO()
    handler = build_handler("text", stream)
    handler.emit(_record("plain"))

    assert "plain" in stream.getvalue()


async def test_each_request_logs_one_line_with_request_run_and_caller(
    registry_path: Path, sqlite_url: str, keys_path: Path, json_logs: io.StringIO
) -> None:
    headers = {**bearer(keys_path, "planner-key", "plans:execute"), "X-Request-ID": "req-77"}
    settings = Settings(registries=[registry_path], database_url=sqlite_url, api_keys=keys_path)

    async with serving(settings) as client:
        response = await client.post(
            "/plans/sequential",
            json={
                "owner": OWNER,
                "calls": [{"call_key": "1", "tool": "echo", "args": {"text": "x"}}],
            },
            headers=headers,
        )

    assert response.status_code == 200
    requests = [line for line in _lines(json_logs) if line["logger"] == "toolloop.http"]
    assert len(requests) == 1
    line = requests[0]
    assert line["request_id"] == "req-77"
    assert line["run_id"] == response.json()["plan_id"]
    assert line["caller"] == "planner-key"
    assert (line["method"], line["route"], line["status"]) == ("POST", "/plans/sequential", 200)
    assert line["duration_ms"] >= 0


def test_the_timestamp_is_the_records_time_in_utc_to_the_millisecond() -> None:
    for created in (1_764_518_400.0, 1_764_518_400.0004999, 1_764_518_400.9999996, 0.5, 42.123):
        expected = datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")
        assert _timestamp(created) == expected


def test_extra_fields_follow_the_standard_ones_in_name_order() -> None:
    line = orjson.loads(JsonFormatter().format(_record("x", zeta=1, alpha=2, mid=3)))

    assert list(line)[-3:] == ["alpha", "mid", "zeta"]


def test_the_whole_line_is_redacted_context_and_keys_included() -> None:
    token = enter_context(LogContext(request_id=f"Bearer {SECRET}"))
    try:
        bind_run("run-1", f"user {SECRET}")
        text = JsonFormatter().format(_record("x", **{f"k {SECRET}": [f"v {SECRET}"]}))
    finally:
        leave_context(token)

    assert SECRET not in text
    line = orjson.loads(text)
    assert line["request_id"] == "Bearer [REDACTED]"
    assert line["caller"] == "user [REDACTED]"
    assert line["k [REDACTED]"] == ["v [REDACTED]"]


class _CountingStream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


def _emit(
    handler: logging.Handler,
    message: str,
    level: int = logging.INFO,
    logger: str = ACCESS_LOGGER,
) -> None:
    handler.handle(logging.LogRecord(logger, level, __file__, 1, message, (), None))


def _messages(stream: io.StringIO) -> list[str]:
    return [line["message"] for line in _lines(stream)]


async def test_the_lines_of_one_loop_turn_are_written_together_at_its_end() -> None:
    stream = _CountingStream()
    handler = build_handler("json", stream)
    for number in range(3):
        _emit(handler, f"line {number}")
    assert stream.writes == 0
    await asyncio.sleep(0)
    assert (stream.writes, _messages(stream)) == (1, ["line 0", "line 1", "line 2"])
    _emit(handler, "next turn")
    await asyncio.sleep(0)
    assert (stream.writes, _messages(stream)[-1]) == (2, "next turn")


@pytest.mark.parametrize(
    ("level", "logger"),
    [(logging.WARNING, ACCESS_LOGGER), (logging.INFO, "uvicorn.error")],
    ids=["a warning", "another logger's line"],
)
async def test_a_line_other_than_an_access_line_is_written_at_once_after_those_kept(
    level: int, logger: str
) -> None:
    # uvicorn's "Application shutdown complete." comes in the turn that ends the
    # process (it re-raises SIGTERM): kept for the turn's end, it was lost.
    stream = _CountingStream()
    handler = build_handler("json", stream)
    _emit(handler, "kept")
    _emit(handler, "at once", level, logger)
    assert (stream.writes, _messages(stream)) == (1, ["kept", "at once"])
    await asyncio.sleep(0)  # the turn's write finds nothing left
    assert stream.writes == 1


def test_lines_outside_an_event_loop_are_written_at_once() -> None:
    stream = _CountingStream()
    handler = build_handler("text", stream)
    _emit(handler, "now")
    assert stream.writes == 1
    assert "now" in stream.getvalue()


async def test_flush_and_close_write_the_lines_kept() -> None:
    stream = _CountingStream()
    handler = build_handler("json", stream)
    _emit(handler, "first")
    handler.flush()
    assert _messages(stream) == ["first"]
    _emit(handler, "second")
    handler.close()
    assert _messages(stream) == ["first", "second"]


def test_lines_kept_on_a_loop_stopped_before_its_turn_ended_go_out_with_the_next_loops() -> None:
    stream = _CountingStream()
    handler = build_handler("json", stream)
    stopped = asyncio.new_event_loop()
    try:
        # The write is scheduled for after this callback, and the loop stops first.
        stopped.call_soon(lambda: (_emit(handler, "kept"), stopped.stop()))
        stopped.run_forever()
    finally:
        stopped.close()
    assert stream.writes == 0

    async def later() -> None:
        _emit(handler, "next loop")
        await asyncio.sleep(0)

    asyncio.run(later())
    assert _messages(stream) == ["kept", "next loop"]


class _Route:
    path = "/plans/sequential"


def _access_logger(stream: io.StringIO) -> logging.Logger:
    """The access logger, outside the hierarchy (pytest's handlers sit on the root)."""
    logger = logging.Logger(ACCESS_LOGGER)
    logger.addHandler(build_handler("json", stream))
    return logger


def _refuse_records(*args: Any, **kwargs: Any) -> logging.LogRecord:
    raise AssertionError("the access line was to be made without a record")


_NO_CONTEXT = object()


@pytest.mark.parametrize(
    ("method", "status", "error", "path", "context"),
    [
        ("POST", 200, None, "/plans/sequential", LogContext(request_id="req-1")),
        ("POST", 500, "RuntimeError", f"/runs/{SECRET}", LogContext(request_id="req-1")),
        ("GET", 404, None, '/runs/"quoted"\\/ünïcode', LogContext(request_id="req-1")),
        ("POST", 200, None, "/plans/sequential", LogContext(request_id=f"{SECRET}")),
        ("POST", 200, None, "/plans/sequential", LogContext(bound_caller=f"Bearer {SECRET}")),
        ("DELETE", 405, None, "/plans/sequential", LogContext()),
        (SECRET, 405, None, "/plans/sequential", LogContext()),
        ("POST", 200, None, "/plans/sequential", _NO_CONTEXT),
    ],
    ids=[
        "plain",
        "an error and a secret",
        "quotes and unicode",
        "a secret request id",
        "a secret caller",
        "an empty context",
        "a secret method",
        "no context",
    ],
)
def test_an_access_line_made_without_a_record_is_the_line_logging_makes(
    monkeypatch: pytest.MonkeyPatch,
    method: str,
    status: int,
    error: str | None,
    path: str,
    context: LogContext | object,
) -> None:
    scope = {"type": "http", "method": method, "path": path, "route": _Route()}
    streams = {"without a record": io.StringIO(), "through logging": io.StringIO()}
    token = enter_context(context) if isinstance(context, LogContext) else None
    try:
        if isinstance(context, LogContext) and context.request_id == "req-1":
            bind_run("run-1", "alice")
        for way, stream in streams.items():
            logger = _access_logger(stream)
            if way == "without a record":
                monkeypatch.setattr(logger, "makeRecord", _refuse_records)
            else:
                logger.addFilter(lambda record: True)  # a filter: logging must see the record
            monkeypatch.setattr(middleware, "logger", logger)
            middleware.ObservabilityMiddleware(None)._record(scope, status, 0.0123456, error)
    finally:
        if token is not None:
            leave_context(token)

    assert SECRET not in streams["without a record"].getvalue()
    (fast,), (slow,) = (_lines(stream) for stream in streams.values())
    assert fast.pop("ts").endswith("+00:00")
    slow.pop("ts")
    assert list(fast.items()) == list(slow.items())  # the same fields, in the same order
    if SECRET not in method:
        assert fast["message"] == f"{method} /plans/sequential {status}"


def test_a_line_is_made_without_a_record_for_the_service_s_own_json_handler() -> None:
    logger = _access_logger(io.StringIO())
    (own,) = logger.handlers
    assert own_json_handler(logger, logging.INFO) is own
    assert own_json_handler(logger, logging.DEBUG) is own

    child = logging.Logger("toolloop.http.child")
    child.parent = logger
    assert own_json_handler(child, logging.INFO) is own


def _logger_filtered(logger: logging.Logger, own: logging.Handler) -> None:
    logger.addFilter(lambda record: True)


def _handler_filtered(logger: logging.Logger, own: logging.Handler) -> None:
    own.addFilter(lambda record: True)


def _handler_above_the_level(logger: logging.Logger, own: logging.Handler) -> None:
    own.setLevel(logging.WARNING)  # it would drop the record


def _second_handler(logger: logging.Logger, own: logging.Handler) -> None:
    logger.addHandler(logging.NullHandler())


def _text_format(logger: logging.Logger, own: logging.Handler) -> None:
    own.setFormatter(RedactingTextFormatter())


def _disabled(logger: logging.Logger, own: logging.Handler) -> None:
    logger.disabled = True


@pytest.mark.parametrize(
    "change",
    [
        _logger_filtered,
        _handler_filtered,
        _handler_above_the_level,
        _second_handler,
        _text_format,
        _disabled,
    ],
)
def test_any_other_logging_setup_gets_the_record(
    change: Callable[[logging.Logger, logging.Handler], None],
) -> None:
    logger = _access_logger(io.StringIO())
    change(logger, logger.handlers[0])
    assert own_json_handler(logger, logging.INFO) is None


def test_a_logger_that_does_not_propagate_reaches_no_handler_above_it() -> None:
    child = logging.Logger("toolloop.http.child")
    child.parent = _access_logger(io.StringIO())
    child.propagate = False
    assert own_json_handler(child, logging.INFO) is None  # nothing would write its record


def test_a_line_that_cannot_be_made_never_fails_the_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: Any, **kwargs: Any) -> str:
        raise ValueError("cannot format")

    monkeypatch.setattr(JsonFormatter, "line", broken)
    monkeypatch.setattr(JsonFormatter, "access_line", broken)
    monkeypatch.setattr(logging, "raiseExceptions", False)  # logging's own error handling
    stream = io.StringIO()
    monkeypatch.setattr(middleware, "logger", _access_logger(stream))
    scope = {"type": "http", "method": "GET", "path": "/runs", "route": _Route()}

    middleware.ObservabilityMiddleware(None)._record(scope, 200, 0.001, None)

    assert stream.getvalue() == ""


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _emit_through(handler: logging.Handler, stream: io.StringIO) -> str:
    handler.emit(_record("key=%s", SECRET))
    handler.flush()
    return stream.getvalue()


def test_a_terminal_gets_readable_coloured_lines_and_a_pipe_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    terminal, pipe = _Terminal(), io.StringIO()

    on_terminal = _emit_through(build_handler(None, terminal), terminal)
    on_pipe = _emit_through(build_handler(None, pipe), pipe)

    assert "\x1b[32mINFO\x1b[0m toolloop.test key=[REDACTED]" in on_terminal
    assert SECRET not in on_terminal
    assert orjson.loads(on_pipe)["message"] == "key=[REDACTED]"


def test_a_chosen_format_wins_and_no_color_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    json_terminal, text_terminal = _Terminal(), _Terminal()

    as_json = _emit_through(build_handler("json", json_terminal), json_terminal)
    plain = _emit_through(build_handler(None, text_terminal), text_terminal)

    assert orjson.loads(as_json)["message"] == "key=[REDACTED]"
    assert " INFO toolloop.test key=[REDACTED]" in plain
    assert "\x1b[" not in plain
