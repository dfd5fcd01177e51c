"""schemathesis over the whole OpenAPI document, against a real server, with auth."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import checks

from app.api.auth import create_key
from tests.live_server import live_server

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_REGISTRY = REPO / "registries" / "example.yml"
MAX_EXAMPLES = int(os.environ.get("TOOLLOOP_FUZZ_EXAMPLES", "15"))
# A schema-valid plan may still name an unknown owner or tool: the registry, not
# the OpenAPI document, decides that, so a 422 there is the right answer.
SEMANTIC = [checks.positive_data_acceptance]


@pytest.fixture(scope="module")
def admin_key(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    keys = tmp_path_factory.mktemp("keys") / "keys.yml"
    return keys, create_key(keys, "fuzzer", ["admin"])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, admin_key: tuple[Path, str]) -> Iterator[str]:
    keys, _ = admin_key
    workdir = tmp_path_factory.mktemp("fuzz")
    profiles = workdir / "profiles.yml"
    # Every model endpoint is a closed local port: a router run that gets that far
    # ends `error` / `llm_error` at once, and nothing leaves the machine.
    profiles.write_text(
        "profiles:\n"
        "  router-small: {provider: openai, base_url: 'http://127.0.0.1:9/v1', model: m}\n"
        "  final-large: {provider: anthropic, base_url: 'http://127.0.0.1:9', model: m}\n"
    )
    with live_server(
        workdir,
        [
            "--registry",
            str(EXAMPLE_REGISTRY),
            "--api-keys",
            str(keys),
            "--profiles",
            str(profiles),
        ],
        env={"TOOLLOOP_AUTH_FAILURE_BURST": "100000", "TOOLLOOP_LLM_MAX_ATTEMPTS": "1"},
    ) as base:
        yield base


def test_every_operation_answers_within_its_schema_and_never_5xx(
    server: str, admin_key: tuple[Path, str]
) -> None:
    _, key = admin_key
    headers = {"Authorization": f"Bearer {key}"}
    schema = schemathesis.openapi.from_url(f"{server}/openapi.json", headers=headers)
    failures: list[str] = []
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 5

    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
        def exercise(case: schemathesis.Case) -> None:
            case.call_and_validate(headers=headers, timeout=30, excluded_checks=SEMANTIC)

        try:
            exercise()
        except (Exception, BaseExceptionGroup) as exc:
            failures.append(f"{operation.label}: {exc}")
    assert not failures, "\n\n".join(failures)
