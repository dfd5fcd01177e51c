"""Signing in with an API key, and out. The key is checked once, as the API checks it
(and failed attempts are throttled per peer alike), and never kept."""

from __future__ import annotations

import hmac
import secrets

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from app.api.auth.keyring import KeyRing
from app.api.auth.throttle import FailedAuthThrottle
from app.api.console import forms
from app.api.console.pages import render
from app.api.console.session_deps import (
    BASE,
    csrf_checked,
    current_session,
    keys_configured,
    secure_headers,
    sessions_of,
    set_session_cookie,
)
from app.api.console.sessions import COOKIE

router = APIRouter(prefix=BASE, include_in_schema=False)
# Binds the sign-in form to this browser, before any session exists (login CSRF).
SIGN_IN_COOKIE = "toolloop_console_sign_in"


def safe_next(value: str | None) -> str:
    """Only a console path: never a redirect to another site."""
    if value and value.startswith(f"{BASE}/") and not value.startswith("//") and "\\" not in value:
        return value
    return f"{BASE}/runs"


@router.get("/sign-in")
async def sign_in_form(request: Request) -> Response:
    if not keys_configured(request):
        return RedirectResponse(f"{BASE}/runs", status_code=303)
    return _form(request, safe_next(request.query_params.get("next")))


def _form(request: Request, next_path: str, error: str | None = None) -> Response:
    token = secrets.token_urlsafe(24)
    response = render(
        request,
        None,
        "sign_in.html",
        401 if error else 200,
        title="Sign in",
        csrf_token=token,
        next=next_path,
        error=error,
    )
    response.set_cookie(
        SIGN_IN_COOKIE,
        token,
        path=BASE,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


@router.post("/sign-in")
async def sign_in(request: Request) -> Response:
    if not keys_configured(request):
        return RedirectResponse(f"{BASE}/runs", status_code=303)
    form = await forms.read_form(request)
    next_path = safe_next(form.get("next"))
    expected = request.cookies.get(SIGN_IN_COOKIE, "")
    if not expected or not hmac.compare_digest(expected, form.get("csrf_token", "")):
        return _form(request, next_path, "The form expired; please sign in again.")
    keyring: KeyRing = request.app.state.keyring
    throttle: FailedAuthThrottle = request.app.state.auth_throttle
    address = request.client.host if request.client else "unknown"
    if (wait := throttle.blocked_for(address)) is not None:
        return _form(request, next_path, f"Too many failed attempts; retry in {wait} s.")
    principal = keyring.authenticate(form.get("api_key", "").strip())
    if principal is None:
        throttle.record_failure(address)
        return _form(request, next_path, "That API key is not valid.")
    session = sessions_of(request).begin(principal)
    response = RedirectResponse(next_path, status_code=303)
    set_session_cookie(request, response, session)
    response.delete_cookie(SIGN_IN_COOKIE, path=BASE)
    secure_headers(response)
    return response


@router.post("/sign-out")
async def sign_out(request: Request) -> Response:
    session = current_session(request)
    if session is not None:
        await csrf_checked(request, session)
        sessions_of(request).end(session.id)
    response = RedirectResponse(f"{BASE}/sign-in", status_code=303)
    response.delete_cookie(COOKIE, path=BASE)
    secure_headers(response)
    return response
