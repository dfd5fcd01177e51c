"""CORS for the web origins the operator lists (`TOOLLOOP_CORS_ORIGINS`), and no other.

Without the setting no CORS header is ever sent, so a browser lets no other
site's page read an answer nor send a request that needs a preflight (a JSON
body, an `Authorization` header). Keys travel in `Authorization`, not in
cookies: credentials mode stays off.
"""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware

ALLOWED_METHODS = ("GET", "POST")
ALLOWED_HEADERS = ("Authorization", "Content-Type", "Idempotency-Key", "Prefer", "X-Request-ID")
EXPOSED_HEADERS = ("X-Request-ID", "Retry-After", "Location", "WWW-Authenticate")


def allow_cors(app: FastAPI, origins: Sequence[str]) -> None:
    app.add_middleware(
        CORSMiddleware,
        allow_origins=list(origins),
        allow_methods=list(ALLOWED_METHODS),
        allow_headers=list(ALLOWED_HEADERS),
        expose_headers=list(EXPOSED_HEADERS),
        allow_credentials=False,
    )
