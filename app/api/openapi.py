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

from app.api.problems import PROBLEM_MEDIA_TYPE, ProblemOut

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


def _problem(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {
            PROBLEM_MEDIA_TYPE: {"schema": {"$ref": _REF_TEMPLATE.format(model="ProblemOut")}}
        },
    }


_AUTH_FAILURES = {
    "401": "No API key, or a key that is not valid (WWW-Authenticate says which).",
    "403": "The API key lacks the scope this operation needs.",
    "429": "Too many failed authentication attempts from this address (see Retry-After).",
}


def _problem_media_type(response: dict[str, Any]) -> None:
    """Problem bodies are served as application/problem+json, never application/json."""
    content = response.get("content", {})
    plain = content.get("application/json", {})
    if plain.get("schema", {}).get("$ref", "").endswith("/ProblemOut"):
        content[PROBLEM_MEDIA_TYPE] = content.pop("application/json")


def _document_auth_failures(responses: dict[str, Any]) -> None:
    for status, description in _AUTH_FAILURES.items():
        responses.setdefault(status, _problem(description))


_NOT_JSON = "The request body is not sent as Content-Type: application/json."


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
            for path, operations in document["paths"].items():
                for operation in operations.values():
                    for response in operation["responses"].values():
                        _problem_media_type(response)
                    if path in OPEN_PATHS:
                        operation["security"] = []
                    else:
                        _document_auth_failures(operation["responses"])
                    if "requestBody" in operation:
                        operation["responses"].setdefault("415", _problem(_NOT_JSON))
            readiness = document["paths"].get("/readyz", {}).get("get")
            if readiness is not None:
                readiness["responses"].setdefault("503", _problem("Not ready: see detail."))
            schemas = components.setdefault("schemas", {})
            schemas.setdefault(
                "ProblemOut", ProblemOut.model_json_schema(ref_template=_REF_TEMPLATE)
            )
            for name, model in sorted(_request_models.items()):
                schema = model.model_json_schema(ref_template=_REF_TEMPLATE)
                schemas.update(schema.pop("$defs", {}))
                schemas[name] = schema
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = build  # type: ignore[method-assign]
