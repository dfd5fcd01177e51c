"""The operators' console at `/console`: server-rendered pages over the same service
functions as the API, a stylesheet and a little JavaScript of its own for live updates."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from app.api.console import approvals, pages, sign_in
from app.api.console.forms import FormTooLarge
from app.api.console.session_deps import (
    BASE,
    CsrfRejected,
    ScopeMissing,
    SignInRequired,
    current_session,
)

STATIC = Path(__file__).with_name("static")


def install_console(app: FastAPI) -> None:
    app.include_router(sign_in.router)
    app.include_router(pages.router)
    app.include_router(approvals.router)
    app.mount(f"{BASE}/static", StaticFiles(directory=STATIC), name="console-static")
    app.add_exception_handler(SignInRequired, _to_sign_in)
    app.add_exception_handler(ScopeMissing, _scope_missing)
    app.add_exception_handler(CsrfRejected, _csrf_rejected)
    app.add_exception_handler(FormTooLarge, _form_too_large)


async def _to_sign_in(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, SignInRequired)
    return RedirectResponse(f"{BASE}/sign-in?next={exc.next_path}", status_code=303)


async def _scope_missing(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ScopeMissing)
    detail = f"Your API key lacks the {exc.scope!r} scope this page needs."
    return pages.render(request, exc.session, "error.html", 403, title="Forbidden", detail=detail)


async def _csrf_rejected(request: Request, _: Exception) -> Response:
    detail = "The form did not carry this session's token; reload the page and try again."
    session = current_session(request)
    return pages.render(request, session, "error.html", 403, title="Forbidden", detail=detail)


async def _form_too_large(request: Request, _: Exception) -> Response:
    session = current_session(request)
    detail = "The form is larger than the console accepts."
    return pages.render(request, session, "error.html", 413, title="Too large", detail=detail)
