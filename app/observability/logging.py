"""Structured logs: one JSON object per line, redacted at a single choke point.

Every handler the service installs formats with `JsonFormatter` (or
`RedactingTextFormatter`); both pass the rendered message, the exception text
and every extra field through the engine's `redact_text`, so no secret that
reaches a log call reaches a log line, whichever logger emitted it.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import IO, Any, Literal

import orjson

from app.foundation.redaction import DEFAULT_REDACTOR, may_hold_secret, redact_text
from app.observability.context import current_context

LogFormat = Literal["json", "text"]

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message",
    "asctime",
    "taskName",
    "color_message",  # uvicorn's duplicate of the message with ANSI colours
}
# uvicorn's own loggers: routed through the root handler instead of their own.
UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = record.__dict__
        # Extra fields in name order: the set difference is one C pass over the record.
        extra = [(key, fields[key]) for key in sorted(fields.keys() - _STANDARD)]
        if record.exc_info:
            exc: str | None = self.formatException(record.exc_info)
        else:
            exc = record.exc_text or None
        stack = self.formatStack(record.stack_info) if record.stack_info else None
        return self.line(
            record.created, record.levelname, record.name, _message(record), extra, exc, stack
        )

    def line(
        self,
        created: float,
        level: str,
        name: str,
        message: str,
        extra: Iterable[tuple[str, Any]],
        exc: str | None = None,
        stack: str | None = None,
    ) -> str:
        """The line of a record with these attributes and extra fields (in order)."""
        context = current_context()
        line: dict[str, Any] = {
            "ts": _timestamp(created),
            "level": level,
            "logger": name,
            "message": message,
            "request_id": None,
            "run_id": None,
            "caller": None,
        }
        if context is not None:
            line["request_id"] = context.request_id
            line["run_id"] = context.run_id
            line["caller"] = context.caller
        for key, value in extra:
            if key not in line:
                line[key] = _plain(value)
        if exc is not None:
            line["exc"] = exc
        if stack is not None:
            line["stack"] = stack
        # The line as written is scanned for the patterns' literals: most hold none
        # and are clean as they are; the rest are written again, redacted.
        text = orjson.dumps(line, default=_fallback).decode()
        if not may_hold_secret(text):
            return text
        return orjson.dumps(DEFAULT_REDACTOR.redact(line), default=_fallback).decode()

    def access_line(
        self,
        created: float,
        level: str,
        name: str,
        method: str,
        route: str,
        path: str,
        status: int,
        duration_ms: float,
        error: str | None,
    ) -> str:
        """The line `line` makes of a request's access record (message "METHOD route
        status", extra fields `duration_ms`, `error` when set, `method`, `path`,
        `route`, `status`), built in one step: one per request, at half the cost."""
        context = current_context()
        if context is None:
            request_id = run_id = caller = None
        else:
            request_id, run_id, caller = context.request_id, context.run_id, context.caller
        line: dict[str, Any] = {
            "ts": _timestamp(created),
            "level": level,
            "logger": name,
            "message": f"{method} {route} {status:d}",
            "request_id": request_id,
            "run_id": run_id,
            "caller": caller,
            "duration_ms": duration_ms,
        }
        if error is not None:
            line["error"] = error
        line["method"] = method
        line["path"] = path
        line["route"] = route
        line["status"] = status
        # The texts scanned are the line's only ones that can hold a pattern's
        # literal: the keys and the time hold none, and none spans a line break
        # (nor the message's spaces). A third of the cost of scanning the line.
        texts = f"{level}\n{name}\n{method}\n{route}\n{path}\n{request_id}\n{run_id}\n{caller}"
        if not may_hold_secret(f"{texts}\n{error}"):
            return orjson.dumps(line).decode()
        return orjson.dumps(DEFAULT_REDACTOR.redact(line), default=_fallback).decode()


class RedactingTextFormatter(logging.Formatter):
    """Readable lines for a person at a terminal, with the same redaction; `colour`
    marks the level (never inside the redacted text)."""

    def __init__(self, *, colour: bool = False) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")
        self.colour = colour

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        context = current_context()
        if context is not None and context.request_id is not None:
            text = f"{text} [request_id={context.request_id} run_id={context.run_id}]"
        text = redact_text(text)
        if self.colour:
            level = f" {record.levelname} "
            shade = LEVEL_COLOURS.get(record.levelname, "")
            text = text.replace(level, f" {shade}{record.levelname}{RESET} ", 1)
        return text


LEVEL_COLOURS = {
    "DEBUG": "\x1b[2m",
    "INFO": "\x1b[32m",
    "WARNING": "\x1b[33m",
    "ERROR": "\x1b[1;31m",
    "CRITICAL": "\x1b[1;31m",
}
RESET = "\x1b[0m"


def chosen_format(fmt: LogFormat | None, stream: IO[str]) -> LogFormat:
    """JSON lines for a log shipper, readable lines for a person: with no format set,
    text when the stream is a terminal, JSON otherwise."""
    if fmt is not None:
        return fmt
    return "text" if _is_terminal(stream) else "json"


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


# (whole seconds, their ISO text): every line of the same second shares it.
_second: tuple[float, str] = (0.0, "")


def _timestamp(created: float) -> str:
    """`datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")`."""
    global _second
    if created < 0:
        return datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")
    fraction, whole = math.modf(created)
    micros = round(fraction * 1_000_000)  # as `datetime.fromtimestamp` rounds
    if micros >= 1_000_000:
        whole, micros = whole + 1, micros - 1_000_000
    seconds, text = _second
    if whole != seconds:
        text = datetime.fromtimestamp(whole, UTC).isoformat(timespec="seconds")[:-6]
        _second = (whole, text)
    return f"{text}.{micros // 1000:03d}+00:00"


def _message(record: logging.LogRecord) -> str:
    """The rendered message, not yet redacted."""
    try:
        return record.getMessage()
    except Exception:  # a bad format call: logging would print its arguments unredacted
        return f"{record.msg!s} (log arguments did not match the format)"


# A tuple, not `bool | int | float`: that expression builds a union object per call.
_SCALARS = (str, bool, int, float)


def _plain(value: Any) -> Any:
    """An extra field as the line holds it before the line is redacted: JSON values
    as they are, anything else as its redacted `repr`."""
    if value is None or isinstance(value, _SCALARS):
        return value
    try:
        orjson.dumps(value)
    except TypeError:
        return redact_text(repr(value))
    return DEFAULT_REDACTOR.redact(value)


def _fallback(value: Any) -> str:
    return redact_text(repr(value))


# The middleware's line per request (`app.observability.middleware`).
ACCESS_LOGGER = "toolloop.http"


class TurnBatchingHandler(logging.StreamHandler[IO[str]]):
    """A stream handler that writes the access lines of one turn of the event loop together.

    Each write to a file or pipe is a system call, and one that lets go of the
    GIL: in the server, another thread waiting for the GIL (aiosqlite's) then
    takes it, and the loop's thread waits to get it back, once per request for
    the access line. Access lines below WARNING emitted on a running loop are
    kept until the end of its turn (a callback scheduled with the first of
    them). Any other line, `flush` and `close` write at once, after the lines
    kept, so lines keep their order; a turn that never ends (uvicorn re-raises
    SIGTERM once it has shut down, which ends the process in that turn) can
    lose no line but its own access lines.
    """

    def __init__(self, stream: IO[str]) -> None:
        super().__init__(stream)
        self._kept: list[str] = []
        self._turn_of: asyncio.AbstractEventLoop | None = None  # the loop a write is scheduled on

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)
            return
        self.keep(line, record.levelno, record.name, record)

    def keep(
        self, line: str, levelno: int, name: str, record: logging.LogRecord | None = None
    ) -> None:
        """Write a formatted line: an access line below WARNING at the end of the loop's
        turn, any other at once (after the lines kept)."""
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        with self.lock:  # type: ignore[union-attr]
            self._kept.append(line)
            if loop is None or levelno >= logging.WARNING or name != ACCESS_LOGGER:
                self._write_kept(record)
            elif self._turn_of is not loop:
                # Also when a write was scheduled on a loop since closed: it never runs.
                self._turn_of = loop
                loop.call_soon(self._end_of_turn)

    def _end_of_turn(self) -> None:
        with self.lock:  # type: ignore[union-attr]
            self._turn_of = None
            self._write_kept(None)

    def _write_kept(self, record: logging.LogRecord | None) -> None:
        if not self._kept:
            return
        text = self.terminator.join(self._kept) + self.terminator
        self._kept.clear()
        try:
            self.stream.write(text)
            self.stream.flush()
        except RecursionError:
            raise
        except Exception:
            self.handleError(record or logging.makeLogRecord({"msg": "(log lines of a loop turn)"}))

    def flush(self) -> None:
        with self.lock:  # type: ignore[union-attr]
            self._write_kept(None)
        super().flush()

    def close(self) -> None:
        self.flush()
        super().close()


def own_json_handler(logger: logging.Logger, level: int) -> TurnBatchingHandler | None:
    """The one handler a record of `logger` at `level` would reach, when it is the
    service's own JSON handler and nothing on the way (a filter, another handler, a
    disabled logger) could change what it writes: the line can then be made
    without a `LogRecord` (`JsonFormatter.line`) and handed to it (`keep`). None
    otherwise: the record must go through `logging`."""
    if logger.disabled:
        return None
    found: TurnBatchingHandler | None = None
    current: logging.Logger | None = logger
    while current is not None:
        if current.filters:
            return None
        for handler in current.handlers:
            if (
                found is not None
                or type(handler) is not TurnBatchingHandler
                or type(handler.formatter) is not JsonFormatter
                or handler.filters
                or level < handler.level
            ):
                return None
            found = handler
        current = current.parent if current.propagate else None
    return found


def build_handler(fmt: LogFormat | None = "json", stream: IO[str] | None = None) -> logging.Handler:
    """`fmt` None: `chosen_format`; colour only on a terminal, and not with NO_COLOR set."""
    target = stream if stream is not None else sys.stderr
    handler = TurnBatchingHandler(target)
    if chosen_format(fmt, target) == "json":
        handler.setFormatter(JsonFormatter())
    else:
        colour = _is_terminal(target) and not os.environ.get("NO_COLOR")
        handler.setFormatter(RedactingTextFormatter(colour=colour))
    return handler


def configure_logging(
    level: str = "INFO", fmt: LogFormat | None = "json", stream: IO[str] | None = None
) -> logging.Handler:
    """Make the root logger's only handler the redacting one; uvicorn's loggers propagate to it."""
    handler = build_handler(fmt, stream)
    # Neither format shows the thread or process a line came from: records need
    # not look them up (a third of a record's making, once per request).
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    root = logging.getLogger()
    for old in list(root.handlers):
        old.flush()  # a replaced handler may still hold a turn's lines
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in UVICORN_LOGGERS:
        uvicorn_logger = logging.getLogger(name)
        uvicorn_logger.handlers.clear()
        uvicorn_logger.propagate = True
    return handler
