"""Who is looking at a console page: the session behind the cookie, its scopes, and the
CSRF token every form must carry back."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import Response

from app.api.auth.principal import OPEN
from app.api.console import forms
from app.api.console.sessions import COOKIE, Session, SessionStore

BASE = "/console"
NEW_SESSION = "console_new_session"


class SignInRequired(Exception):
    """No session (with keys configured): the page sends the browser to sign in."""

    def __init__(self, next_path: str) -> None:
        super().__init__(next_path)
        self.next_path = next_path


class ScopeMissing(Exception):
    def __init__(self, session: Session, scope: str) -> None:
        super().__init__(scope)
        self.session = session
        self.scope = scope


class CsrfRejected(Exception):
    """A form came back without this session's token (or with another one)."""


def keys_configured(request: Request) -> bool:
    return getattr(request.app.state, "keyring", None) is not None


def sessions_of(request: Request) -> SessionStore:
    store: SessionStore | None = getattr(request.app.state, "console_sessions", None)
    if store is None:
        store = request.app.state.console_sessions = SessionStore()
    return store


def current_session(request: Request) -> Session | None:
    return sessions_of(request).get(request.cookies.get(COOKIE))


class ConsoleSession:
    """The dependency of a page: the viewer's session, begun at once in open mode; with
    `scope`, a session whose key lacks it sees a 403 page."""

    def __init__(self, scope: str | None = None) -> None:
        self.scope = scope

    async def __call__(self, request: Request) -> Session:
        session = current_session(request)
        if session is None:
            if keys_configured(request):
                raise SignInRequired(request.url.path)
            session = sessions_of(request).begin(OPEN)
            setattr(request.state, NEW_SESSION, session)
        if self.scope is not None and not session.principal.has(self.scope):
            raise ScopeMissing(session, self.scope)
        return session


def with_session_cookie(request: Request, response: Response, session: Session | None) -> Response:
    """Sets the cookie of a session begun by this request, and the headers every
    console page carries."""
    begun: Session | None = getattr(request.state, NEW_SESSION, None)
    if begun is not None and begun is session:
        set_session_cookie(request, response, begun)
    secure_headers(response)
    return response


def set_session_cookie(request: Request, response: Response, session: Session) -> None:
    response.set_cookie(
        COOKIE,
        session.id,
        path=BASE,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def secure_headers(response: Response) -> None:
    # Everything the console loads comes from this service: no CDN, no inline script.
    response.headers["Content-Security-Policy"] = (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    )
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["Cache-Control"] = "no-store"


async def csrf_checked(request: Request, session: Session) -> dict[str, str]:
    """The form's fields, once its token is this session's."""
    form = await forms.read_form(request)
    if not session.csrf_matches(form.get("csrf_token")):
        raise CsrfRejected
    return form
