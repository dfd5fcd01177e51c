"""The app's route table: the service's routes first, FastAPI's documentation last."""

from __future__ import annotations

import httpx

from app.api.app import create_app
from app.api.auth import install_auth

DOCUMENTATION = ["/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"]


def test_requests_are_matched_against_the_service_s_routes_first() -> None:
    paths = [getattr(route, "path", None) for route in create_app().router.routes]

    assert paths[:2] == ["/plans/sequential", "/plans/parallel"]
    assert paths[-len(DOCUMENTATION) :] == DOCUMENTATION


async def test_the_documentation_is_still_served() -> None:
    app = create_app()
    install_auth(app, None)  # open mode, as the lifespan installs it without a keys file
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        for path in ("/docs", "/redoc", "/docs/oauth2-redirect"):
            response = await client.get(path)
            assert response.status_code == 200, path
            assert response.headers["content-type"].startswith("text/html")
        document = (await client.get("/openapi.json")).json()
    assert "/plans/sequential" in document["paths"]
    assert not set(DOCUMENTATION) & set(document["paths"])
