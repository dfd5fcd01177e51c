"""Console sessions: who signed in, kept server-side; the browser holds only an opaque id.

With API keys configured, a session begins when a key is signed in and ends at sign-out
or after `IDLE_S` without a request; the key itself is never kept, only the name and
scopes it stood for. In open mode every visitor gets a session of the open-mode caller,
so that forms carry a CSRF token there too: a page on another site can post a form to a
loopback address, but it cannot read the token.
"""

from __future__ import annotations

import hmac
import secrets
import time
from dataclasses import dataclass, field

from app.api.auth.principal import Principal

COOKIE = "toolloop_console"
IDLE_S = 8 * 3600.0
MAX_SESSIONS = 10_000


@dataclass
class Session:
    id: str
    principal: Principal
    csrf_token: str
    last_seen: float = field(default_factory=time.monotonic)

    def csrf_matches(self, presented: str | None) -> bool:
        return presented is not None and hmac.compare_digest(presented, self.csrf_token)


class SessionStore:
    """In this process's memory: a restart signs everyone out."""

    def __init__(self, idle_s: float = IDLE_S) -> None:
        self._sessions: dict[str, Session] = {}
        self._idle_s = idle_s

    def begin(self, principal: Principal) -> Session:
        self._forget_idle()
        if len(self._sessions) >= MAX_SESSIONS:
            oldest = min(self._sessions.values(), key=lambda s: s.last_seen)
            del self._sessions[oldest.id]
        session = Session(secrets.token_urlsafe(32), principal, secrets.token_urlsafe(32))
        self._sessions[session.id] = session
        return session

    def get(self, session_id: str | None) -> Session | None:
        session = self._sessions.get(session_id or "")
        if session is None:
            return None
        now = time.monotonic()
        if now - session.last_seen > self._idle_s:
            del self._sessions[session.id]
            return None
        session.last_seen = now
        return session

    def end(self, session_id: str | None) -> None:
        self._sessions.pop(session_id or "", None)

    def _forget_idle(self) -> None:
        cutoff = time.monotonic() - self._idle_s
        for stale in [s.id for s in self._sessions.values() if s.last_seen < cutoff]:
            del self._sessions[stale]
