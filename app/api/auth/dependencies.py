"""Request dependencies that resolve the caller from `Authorization: Bearer <key>`.

`install_auth` puts the key ring (None: open mode, every scope) and the
failed-attempt throttle on `app.state`; a route declares what it needs with
`Annotated[Principal, Depends(require_scope(...))]` or one of the aliases
below. The resolved caller is also left on `request.state.principal` for
logging. The presented key is never logged, echoed or stored.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, FastAPI, Request

from app.api.auth.keyring import KeyRing
from app.api.auth.principal import (
    ADMIN,
    CONFIRMATIONS_DECIDE,
    METRICS_READ,
    OPEN,
    PLANS_EXECUTE,
    ROUTER_RUN,
    RUNS_READ,
    SCOPES,
    Principal,
)
from app.api.auth.throttle import FailedAuthThrottle
from app.api.problems import InsufficientScope, TooManyRequests, Unauthorized

logger = logging.getLogger("toolloop.api.auth")

CHALLENGE = 'Bearer realm="toolloop"'


def install_auth(
    app: FastAPI, keyring: KeyRing | None, throttle: FailedAuthThrottle | None = None
) -> None:
    app.state.keyring = keyring
    app.state.auth_throttle = throttle or FailedAuthThrottle()


async def authenticated(request: Request) -> Principal:
    """Any valid key (or open mode), whatever its scopes."""
    # The scope's state is what `request.state` wraps; read directly, a request
    # not yet authenticated costs no AttributeError.
    request_state = request.scope.setdefault("state", {})
    cached = request_state.get("principal")
    if isinstance(cached, Principal):
        return cached
    state = request.app.state
    if not hasattr(state, "keyring"):
        raise RuntimeError("auth is not installed on this app: call install_auth")
    keyring: KeyRing | None = state.keyring
    principal = OPEN if keyring is None else _authenticate(request, keyring, state.auth_throttle)
    request_state["principal"] = principal
    return principal


def require_scope(scope: str) -> Callable[[Request], Awaitable[Principal]]:
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}")

    async def dependency(request: Request) -> Principal:
        principal = await authenticated(request)
        if not principal.has(scope):
            raise InsufficientScope(
                f"This API key lacks the {scope!r} scope.",
                challenge=f'{CHALLENGE}, error="insufficient_scope"',
            )
        return principal

    return dependency


def require_any_scope(*scopes: str) -> Callable[[Request], Awaitable[Principal]]:
    """A key holding at least one of `scopes` (a route whose own rule then decides)."""
    if not scopes or not set(scopes) <= SCOPES:
        raise ValueError(f"unknown scopes {scopes!r}")
    names = " or ".join(repr(scope) for scope in scopes)

    async def dependency(request: Request) -> Principal:
        principal = await authenticated(request)
        if not any(principal.has(scope) for scope in scopes):
            raise InsufficientScope(
                f"This API key lacks the {names} scope.",
                challenge=f'{CHALLENGE}, error="insufficient_scope"',
            )
        return principal

    return dependency


def _authenticate(request: Request, keyring: KeyRing, throttle: FailedAuthThrottle) -> Principal:
    address = request.client.host if request.client else "unknown"
    token = _bearer_token(request.headers.get("authorization", ""))
    if token is None:
        wait = throttle.blocked_for(address)
        if wait is None:
            raise Unauthorized("Send an API key: Authorization: Bearer <key>.", challenge=CHALLENGE)
    else:
        principal = keyring.authenticate(token)
        if principal is not None:
            return principal
        wait = throttle.record_failure(address)
        if wait is None:
            logger.warning("rejected an unknown API key from %s", address)
            raise Unauthorized(
                "The API key is not valid.",
                challenge=f'{CHALLENGE}, error="invalid_token"',
            )
    raise TooManyRequests(
        f"Too many failed authentication attempts from this address; retry in {wait} s.",
        retry_after_s=wait,
    )


def _bearer_token(header: str) -> str | None:
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


Caller = Annotated[Principal, Depends(authenticated)]
PlansCaller = Annotated[Principal, Depends(require_scope(PLANS_EXECUTE))]
RouterCaller = Annotated[Principal, Depends(require_scope(ROUTER_RUN))]
RunsReader = Annotated[Principal, Depends(require_scope(RUNS_READ))]
MetricsReader = Annotated[Principal, Depends(require_scope(METRICS_READ))]
AdminCaller = Annotated[Principal, Depends(require_scope(ADMIN))]
Decider = Annotated[Principal, Depends(require_scope(CONFIRMATIONS_DECIDE))]
# Listing confirmations: a reader (its own runs' calls) or a decider (every run's).
ConfirmationReader = Annotated[
    Principal, Depends(require_any_scope(RUNS_READ, CONFIRMATIONS_DECIDE))
]
# Cancelling a run: a key that may start some kind of run; the run's own rule decides the rest.
RunController = Annotated[Principal, Depends(require_any_scope(PLANS_EXECUTE, ROUTER_RUN))]
