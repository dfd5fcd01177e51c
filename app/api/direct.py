"""A route whose endpoint takes the request alone, called without FastAPI's handler.

FastAPI's request handler costs every request its dependency solving, body
sniffing and response bookkeeping even when the endpoint declares nothing. For
the busiest routes (plans) the endpoint reads and validates its own body and
resolves its own dependencies, so `DirectRoute` hands it the request directly;
FastAPI still documents the route (OpenAPI) and wraps it as any other (the
request object, exception handlers, the matched route in the scope).

Fail closed: a route that declares anything FastAPI would have to resolve
(a dependency, a parameter, a body) is refused when the app is built.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request
from fastapi.routing import APIRoute
from starlette.responses import Response


class DirectRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        dependant = self.dependant
        declared = (
            dependant.dependencies
            or dependant.path_params
            or dependant.query_params
            or dependant.header_params
            or dependant.cookie_params
            or dependant.body_params
            or self.dependencies
            or dependant.background_tasks_param_name
            or dependant.response_param_name
            or dependant.security_scopes_param_name
            or dependant.http_connection_param_name
            or dependant.websocket_param_name
        )
        if declared or dependant.request_param_name is None:
            raise TypeError(
                f"{self.path}: a DirectRoute endpoint takes the request alone "
                "and resolves what it needs itself"
            )
        endpoint: Callable[[Request], Coroutine[Any, Any, Response]] = self.endpoint
        return endpoint
