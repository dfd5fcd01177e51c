"""The OpenAPI document and the documentation pages, behind the same keys as the API.

FastAPI's own documentation routes answer anyone; these answer any valid key
(or everyone in open mode), so that a keyed service does not describe itself
to callers it would refuse. They come last in the route table: every request
is matched against the table in order.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse, JSONResponse

from app.api.auth import authenticated

OPENAPI_PATH = "/openapi.json"
SWAGGER_PATH = "/docs"
SWAGGER_REDIRECT_PATH = "/docs/oauth2-redirect"
REDOC_PATH = "/redoc"

router = APIRouter(dependencies=[Depends(authenticated)], include_in_schema=False)


def _root_path(request: Request) -> str:
    root: str = request.scope.get("root_path", "")
    return root.rstrip("/")


@router.get(OPENAPI_PATH)
async def openapi_document(request: Request) -> JSONResponse:
    return JSONResponse(request.app.openapi())


@router.get(SWAGGER_PATH)
async def swagger_ui(request: Request) -> HTMLResponse:
    root = _root_path(request)
    return get_swagger_ui_html(
        openapi_url=root + OPENAPI_PATH,
        title=f"{request.app.title} - Swagger UI",
        oauth2_redirect_url=root + SWAGGER_REDIRECT_PATH,
    )


@router.get(SWAGGER_REDIRECT_PATH)
async def swagger_ui_redirect() -> HTMLResponse:
    return get_swagger_ui_oauth2_redirect_html()


@router.get(REDOC_PATH)
async def redoc(request: Request) -> HTMLResponse:
    return get_redoc_html(
        openapi_url=_root_path(request) + OPENAPI_PATH, title=f"{request.app.title} - ReDoc"
    )
