"""What a request must look like before any route sees it: a JSON body, and in
open mode a loopback `Host`.

A web page can send a cross-site request without asking first (no CORS
preflight) only with a form's content types or none; a body must therefore be
`application/json` (charset, if given, `utf-8`), else 415. In open mode (no
keys file) a page on another site could also rename its own host to 127.0.0.1
(DNS rebinding) and read the answers: the `Host` must then name `localhost`,
an address of 127.0.0.0/8 or `[::1]`, any port, else 421 (docs/decisions.md).
Open mode is read from the app's state on each request (`app.api.auth`), so a
service whose auth is not installed yet is treated as open.

A pure ASGI middleware: one pass over the request's headers.
"""

from __future__ import annotations

from functools import lru_cache

from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.auth import is_loopback_host
from app.api.problems import problem_response

# Requests that may change something; a body on the others is never read.
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# The console's forms are form-encoded by the browser; each carries the session's CSRF
# token instead (`app.api.console.session_deps`).
_FORM_PATH_PREFIX = "/console/"


@lru_cache(maxsize=256)
def is_loopback_authority(host_header: bytes) -> bool:
    """A `Host` value naming a loopback host, with or without a port."""
    text = host_header.decode("latin-1").strip()
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or host.count(":") < 2:
            return False
    else:
        host, colon, rest = text.partition(":")
        rest = colon + rest
    if rest and not (rest[0] == ":" and rest[1:].isdigit() and rest[1:].isascii()):
        return False
    return bool(host) and is_loopback_host(host)


@lru_cache(maxsize=64)
def is_json_media_type(content_type: bytes) -> bool:
    """`application/json`, with no parameter but a `charset` of `utf-8`."""
    media_type, *parameters = content_type.decode("latin-1").split(";")
    if media_type.strip().lower() != "application/json":
        return False
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        if name.strip().lower() != "charset" or value.strip().strip('"').lower() != "utf-8":
            return False
    return True


class TransportGuard:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host: bytes | None = None
        content_type: bytes | None = None
        has_body = False
        for name, value in scope["headers"]:
            if name == b"host":
                host = value
            elif name == b"content-type":
                content_type = value
            elif name == b"content-length":
                has_body = value.strip() not in (b"0", b"")
            elif name == b"transfer-encoding":
                has_body = True
        state = getattr(scope.get("app"), "state", None)
        if getattr(state, "keyring", None) is None and (
            host is None or not is_loopback_authority(host)
        ):
            response = problem_response(
                421,
                "misdirected-request",
                "Without API keys this service answers only requests addressed to a loopback "
                "host (localhost, 127.0.0.1, [::1]).",
            )
            await response(scope, receive, send)
            return
        if (
            scope["method"] in _BODY_METHODS
            and not scope["path"].startswith(_FORM_PATH_PREFIX)
            and (
                (content_type is not None and not is_json_media_type(content_type))
                or (content_type is None and has_body)
            )
        ):
            response = problem_response(
                415,
                "unsupported-media-type",
                "Send the request body as JSON: Content-Type: application/json.",
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)
