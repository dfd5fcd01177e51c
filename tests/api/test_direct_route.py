"""`DirectRoute`: the endpoint gets the request alone, and nothing it declares is skipped."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import httpx
import pytest
from fastapi import APIRouter, Depends, FastAPI, Request
from starlette.responses import JSONResponse, Response

from app.api.direct import DirectRoute


async def _dependency() -> str:
    return "resolved"


async def test_the_endpoint_is_called_with_the_request() -> None:
    router = APIRouter(route_class=DirectRoute)

    @router.post("/echo")
    async def echo(request: Request) -> Response:
        return JSONResponse({"path": request.url.path, "body": (await request.json())})

    app = FastAPI()
    app.include_router(router)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
    ) as client:
        response = await client.post("/echo", json={"a": 1})

    assert response.status_code == 200
    assert response.json() == {"path": "/echo", "body": {"a": 1}}


async def _with_dependency(
    request: Request, value: Annotated[str, Depends(_dependency)]
) -> Response:
    return Response()


async def _with_query(request: Request, limit: int = 10) -> Response:
    return Response()


async def _request_alone(request: Request) -> Response:
    return Response()


async def _no_request() -> Response:
    return Response()


@pytest.mark.parametrize(
    ("endpoint", "dependencies"),
    [
        (_with_dependency, None),
        (_with_query, None),
        (_request_alone, [Depends(_dependency)]),
        (_no_request, None),
    ],
)
def test_a_route_that_declares_anything_else_is_refused(
    endpoint: Callable[..., Awaitable[Response]], dependencies: list[Any] | None
) -> None:
    router = APIRouter(route_class=DirectRoute)

    with pytest.raises(TypeError, match="takes the request alone"):
        router.add_api_route("/x", endpoint, methods=["POST"], dependencies=dependencies)
