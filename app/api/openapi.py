"""The OpenAPI document: request bodies parsed by hand still appear as components.

Routes that read their JSON body themselves (to enforce size and depth limits
first) declare it with `json_body(Model)`; `install_openapi` then publishes
each such model, and the models it nests, under `components/schemas`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel

_REF_TEMPLATE = "#/components/schemas/{model}"
OPEN_PATHS = ("/healthz", "/readyz")
_request_models: dict[str, type[BaseModel]] = {}


def json_body(
    model: type[BaseModel], parameters: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """`openapi_extra` for a route whose required JSON body is `model`.

    `parameters` documents headers the route reads by hand (for example
    `Idempotency-Key` and `Prefer`).
    """
    _request_models[model.__name__] = model
    extra: dict[str, Any] = {"parameters": [dict(p) for p in parameters]} if parameters else {}
    return extra | {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"$ref": _REF_TEMPLATE.format(model=model.__name__)}}
            },
        }
    }


def install_openapi(app: FastAPI) -> None:
    def build() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title,
                version=app.version,
                summary=app.summary,
                description=app.description,
                routes=app.routes,
            )
            components = document.setdefault("components", {})
            components["securitySchemes"] = {
                "bearerAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An API key from `toolloop keys create`; not needed "
                    "when the service runs open on a loopback address.",
                }
            }
            document["security"] = [{"bearerAuth": []}]
            for path in OPEN_PATHS:
                for operation in document["paths"].get(path, {}).values():
                    operation["security"] = []
            schemas = components.setdefault("schemas", {})
            for name, model in sorted(_request_models.items()):
                schema = model.model_json_schema(ref_template=_REF_TEMPLATE)
                schemas.update(schema.pop("$defs", {}))
                schemas[name] = schema
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = build  # type: ignore[method-assign]
