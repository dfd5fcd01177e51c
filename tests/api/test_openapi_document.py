"""The OpenAPI document: complete, consistent, and changed only on purpose."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from app.api.app import create_app
from app.settings import Settings

SNAPSHOT = Path(__file__).with_name("openapi.snapshot.json")
EXAMPLE_REGISTRY = Path(__file__).resolve().parents[2] / "registries" / "example.yml"
PROBLEM = "application/problem+json"


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    app = create_app(Settings(registries=[EXAMPLE_REGISTRY]))
    return app.openapi()


def _operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, operation)
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
    ]


def test_the_document_matches_the_committed_snapshot(document: dict[str, Any]) -> None:
    rendered = json.dumps(document, indent=2, sort_keys=True) + "\n"
    if os.environ.get("UPDATE_OPENAPI_SNAPSHOT") == "1":
        SNAPSHOT.write_text(rendered)
    assert SNAPSHOT.read_text() == rendered, (
        "The OpenAPI document changed. If that is deliberate, run "
        "UPDATE_OPENAPI_SNAPSHOT=1 .venv/bin/python -m pytest tests/api/test_openapi_document.py"
    )


def test_every_operation_has_a_unique_operation_id(document: dict[str, Any]) -> None:
    ids = [operation.get("operationId") for _, _, operation in _operations(document)]
    assert all(ids)
    assert len(ids) == len(set(ids))


def test_every_error_is_documented_as_a_problem(document: dict[str, Any]) -> None:
    for method, path, operation in _operations(document):
        for status, response in operation["responses"].items():
            if status[0] in "45":
                content = response.get("content", {})
                assert list(content) == [PROBLEM], (method, path, status)
                assert content[PROBLEM]["schema"]["$ref"].endswith("/ProblemOut")


def test_protected_operations_declare_bearer_auth_and_its_failures(
    document: dict[str, Any],
) -> None:
    assert document["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    for method, path, operation in _operations(document):
        security = operation.get("security", document["security"])
        if path in ("/healthz", "/readyz"):
            assert security == [], path
            continue
        assert security == [{"bearerAuth": []}], (method, path)
        assert {"401", "403"} <= set(operation["responses"]), (method, path)


def test_request_bodies_resolve_to_components_with_examples(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    for method, path, operation in _operations(document):
        body = operation.get("requestBody")
        if body is None:
            continue
        reference = body["content"]["application/json"]["schema"]["$ref"]
        name = reference.rsplit("/", 1)[1]
        assert name in schemas, (method, path)
        if path.startswith("/plans/"):
            assert schemas[name]["examples"], (method, path)
