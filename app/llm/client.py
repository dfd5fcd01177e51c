"""Calls a model named by a profile, over an injected `httpx.AsyncClient`.

Transport faults (connection errors, timeouts, HTTP 429 and 5xx) are retried
with exponential backoff, or after the server's `Retry-After` (seconds or an
HTTP date, capped at `retry_after_max_s`), up to `max_attempts` in all. Other
statuses are not retried. Errors (tree in `app.llm.errors`):

    LLMError
    ├── LLMConfigurationError    the key's environment variable is missing or empty
    ├── LLMRequestError          the conversation cannot be expressed for the provider
    ├── LLMTransportError        retries exhausted, or a status that is not retried
    └── LLMMalformedResponse     a 2xx body that is not the provider's format

The API key is read from the environment on every call and is kept out of
errors, logs and reprs. Response bodies are untrusted: size-capped, parsed
strictly, and only quoted (shortened, key scrubbed) in error messages.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from email.utils import parsedate_to_datetime
from typing import NamedTuple

import httpx

from app.llm import anthropic, openai
from app.llm.bounds import AttemptBounds
from app.llm.errors import LLMConfigurationError, LLMMalformedResponse, LLMTransportError
from app.llm.messages import Message, ModelReply, ToolDefinition
from app.llm.profiles import ModelProfile
from app.llm.wire import ProviderRequest

logger = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]

_ERROR_EXCERPT_BYTES = 4096
_ERROR_EXCERPT_CHARS = 200
_HEADER_SAFE = re.compile(r"[\x21-\x7e]+")
_MAX_KEPT_URLS = 64


class _Adapter(NamedTuple):
    build_request: Callable[
        [ModelProfile, Sequence[Message], Sequence[ToolDefinition], str | None], ProviderRequest
    ]
    parse_response: Callable[[bytes], ModelReply]


_ADAPTERS: Mapping[str, _Adapter] = {
    "openai": _Adapter(openai.build_request, openai.parse_response),
    "anthropic": _Adapter(anthropic.build_request, anthropic.parse_response),
}


class _Answer(NamedTuple):
    status: int
    headers: httpx.Headers
    body: bytes
    complete: bool


class LLMClient:
    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        max_attempts: int = 4,
        backoff_s: float = 1.0,
        backoff_max_s: float = 16.0,
        retry_after_max_s: float = 60.0,
        max_response_bytes: int = 8 * 1024 * 1024,
        sleep: Sleep = asyncio.sleep,
        clock: Clock = time.time,
        environ: Mapping[str, str] = os.environ,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if min(backoff_s, backoff_max_s, retry_after_max_s) < 0:
            raise ValueError("backoff and Retry-After limits must not be negative")
        if max_response_bytes < 1:
            raise ValueError("max_response_bytes must be positive")
        self._http = http
        self._max_attempts = max_attempts
        self._backoff_s = backoff_s
        self._backoff_max_s = backoff_max_s
        self._retry_after_max_s = retry_after_max_s
        self._max_response_bytes = max_response_bytes
        self._sleep = sleep
        self._clock = clock
        self._environ = environ
        self._urls: dict[str, httpx.URL] = {}
        # Whole-attempt bounds, on one loop timer (`app.llm.bounds`), for the loop in use.
        self._bounds: AttemptBounds | None = None

    async def complete(
        self,
        profile: ModelProfile,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
    ) -> ModelReply:
        adapter = _ADAPTERS.get(profile.provider)
        if adapter is None and profile.replays:
            raise LLMConfigurationError(
                f"model profile {profile.name!r} replays a recording: a replay run serves it"
            )
        if adapter is None:
            raise LLMConfigurationError(
                f"model profile {profile.name!r}: unknown provider {profile.provider!r}"
            )
        api_key = None if profile.api_key_env is None else self._api_key(profile)
        request = adapter.build_request(profile, messages, tools, api_key)
        body = await self._post(profile, request, api_key)
        try:
            return adapter.parse_response(body)
        except LLMMalformedResponse as exc:
            raise LLMMalformedResponse(exc.reason, profile=profile.name) from None

    def _api_key(self, profile: ModelProfile) -> str | None:
        if profile.api_key_env is None:
            return None
        key = self._environ.get(profile.api_key_env, "").strip()
        if not key:
            raise LLMConfigurationError(
                f"model profile {profile.name!r}: environment variable "
                f"{profile.api_key_env} (api_key_env) is not set or empty"
            )
        if not _HEADER_SAFE.fullmatch(key):
            raise LLMConfigurationError(
                f"model profile {profile.name!r}: the value of {profile.api_key_env} "
                "has characters that cannot go in an HTTP header"
            )
        return key

    async def _post(
        self, profile: ModelProfile, request: ProviderRequest, key: str | None
    ) -> bytes:
        content = request.body
        for attempt in range(1, self._max_attempts + 1):
            delay: float | None = None
            try:
                answer = await self._attempt(profile, request, content)
            except (httpx.RequestError, TimeoutError) as exc:
                status, cause = None, _describe(exc, profile.timeout_s)
            else:
                if 200 <= answer.status < 300:
                    if not answer.complete:
                        raise LLMMalformedResponse(
                            f"body is larger than {self._max_response_bytes} bytes",
                            profile=profile.name,
                        )
                    return answer.body
                status, cause = answer.status, _status_cause(answer)
                if not _retryable(answer.status):
                    raise self._failure(profile, request, attempt, status, cause, key)
                delay = self._retry_after(answer.headers)
            if attempt == self._max_attempts:
                raise self._failure(profile, request, attempt, status, cause, key)
            wait = self._backoff(attempt) if delay is None else delay
            logger.warning(
                "model profile %r: %s; retry %d of %d in %.2fs",
                profile.name,
                _scrub(cause, key),
                attempt,
                self._max_attempts - 1,
                wait,
            )
            await self._sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _attempt(
        self, profile: ModelProfile, request: ProviderRequest, content: bytes
    ) -> _Answer:
        # What `AsyncClient.stream` does, without its context-manager layers, and
        # with the URL parsed once per profile rather than once per request.
        http = self._http
        sent = http.build_request(
            "POST",
            self._url(request.url),
            content=content,
            headers=request.headers,
            timeout=profile.timeout_s,
        )
        # httpx's timeout bounds each phase; the attempt bound bounds the whole attempt.
        bounds = self._bounds
        if bounds is None or bounds.loop is not asyncio.get_running_loop():
            bounds = self._bounds = AttemptBounds(asyncio.get_running_loop())
        with bounds.within(profile.timeout_s):
            response = await http.send(sent, stream=True)
            try:
                status = response.status_code
                limit = self._max_response_bytes if 200 <= status < 300 else _ERROR_EXCERPT_BYTES
                try:
                    # A transport that answered with the whole body (no read to await).
                    body, complete = response.content, True
                except httpx.ResponseNotRead:
                    body, complete = await _read_streamed(response, limit)
                else:
                    if len(body) > limit:
                        body, complete = body[:limit], False
            finally:
                await response.aclose()
            return _Answer(status, response.headers, body, complete)

    def _url(self, url: str) -> httpx.URL:
        parsed = self._urls.get(url)
        if parsed is None:
            if len(self._urls) >= _MAX_KEPT_URLS:
                self._urls.clear()
            parsed = self._urls[url] = httpx.URL(url)
        return parsed

    def _failure(
        self,
        profile: ModelProfile,
        request: ProviderRequest,
        attempts: int,
        status: int | None,
        cause: str,
        key: str | None,
    ) -> LLMTransportError:
        return LLMTransportError(
            profile=profile.name,
            url=request.url,
            attempts=attempts,
            status=status,
            cause=_scrub(cause, key),
        )

    def _backoff(self, attempt: int) -> float:
        return float(min(self._backoff_max_s, self._backoff_s * 2 ** (attempt - 1)))

    def _retry_after(self, headers: httpx.Headers) -> float | None:
        seconds = _seconds(headers.get("retry-after-ms"))
        if seconds is not None:
            seconds /= 1000
        else:
            seconds = self._retry_after_seconds(headers.get("retry-after"))
        return None if seconds is None else min(seconds, self._retry_after_max_s)

    def _retry_after_seconds(self, value: str | None) -> float | None:
        if value is None:
            return None
        seconds = _seconds(value)
        if seconds is not None:
            return seconds
        try:
            moment = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, moment.timestamp() - self._clock())


def _retryable(status: int) -> bool:
    return status == 429 or 500 <= status <= 599


def _seconds(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


async def _read_streamed(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """The body of a response not read yet, up to `limit` bytes; whether it was whole."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(chunks)[:limit], False
    return b"".join(chunks), True


def _describe(exc: Exception, timeout_s: float) -> str:
    if isinstance(exc, TimeoutError):
        return f"no complete answer within {timeout_s:g}s"
    detail = str(exc)
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


def _status_cause(answer: _Answer) -> str:
    text = answer.body.decode("utf-8", errors="replace")
    text = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    if len(text) > _ERROR_EXCERPT_CHARS:
        text = text[: _ERROR_EXCERPT_CHARS - 3] + "..."
    return f"HTTP {answer.status}: {text}" if text else f"HTTP {answer.status}"


def _scrub(text: str, key: str | None) -> str:
    return text.replace(key, "[redacted]") if key else text
