"""The compose file's `temporal` profile: Temporal on the compose PostgreSQL, the service
with TOOLLOOP_EXECUTOR=temporal and two workers. With Docker Compose, `docker compose
config` checks it too; without it (no engine here), its structure is checked as written."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.live_server import REPO

COMPOSE = REPO / "docker-compose.yml"
PROFILE = "temporal"


def _compose() -> dict[str, Any]:
    compose: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return compose


def _services() -> dict[str, Any]:
    services: dict[str, Any] = _compose()["services"]
    return services


def _in_profile(service: dict[str, Any]) -> bool:
    return PROFILE in service.get("profiles", [])


def _temporal_services() -> dict[str, Any]:
    return {name: s for name, s in _services().items() if _in_profile(s)}


def _mounted(service: dict[str, Any]) -> dict[str, str]:
    """Container path -> repository path, for the bind mounts of repository files."""
    found = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith("./"):
            found[target] = source
    return found


def _has_health_check(service: dict[str, Any]) -> bool:
    """Its own, or the one of the image it builds from the Dockerfile."""
    if "healthcheck" in service:
        return service["healthcheck"] != {"disable": True}
    return service.get("build") == "." and "HEALTHCHECK" in (REPO / "Dockerfile").read_text()


def test_the_profile_holds_temporal_its_setup_the_service_and_the_workers() -> None:
    assert set(_temporal_services()) == {
        "temporal-schema", "temporal", "temporal-namespace", "toolloop-temporal",
        "toolloop-worker",
    }  # fmt: skip
    # A plain `docker compose up` is unchanged: nothing else is in a profile.
    plain = {name for name, s in _services().items() if "profiles" not in s}
    assert plain == {"postgres", "toolloop", "otel-collector", "prometheus", "grafana"}


def test_every_dependency_exists_and_starts_under_the_profile() -> None:
    services = _services()
    for name, service in _temporal_services().items():
        for needed, condition in service.get("depends_on", {}).items():
            assert needed in services, (name, needed)
            assert "profiles" not in services[needed] or _in_profile(services[needed])
            assert condition["condition"] in {
                "service_healthy", "service_started", "service_completed_successfully",
            }  # fmt: skip
            if condition["condition"] == "service_healthy":
                assert _has_health_check(services[needed]), (name, needed)


def test_temporal_runs_on_the_compose_postgres_with_its_schema_set_first() -> None:
    services = _services()
    postgres = services["postgres"]["environment"]
    server = services["temporal"]
    environment = server["environment"]

    assert server["image"].startswith("temporalio/server:")
    assert environment["DB"] == "postgres12"
    assert environment["POSTGRES_SEEDS"] == "postgres"
    assert environment["POSTGRES_USER"] == postgres["POSTGRES_USER"]
    assert environment["POSTGRES_PWD"] == postgres["POSTGRES_PASSWORD"]
    assert server["depends_on"]["temporal-schema"] == {
        "condition": "service_completed_successfully"
    }
    schema = services["temporal-schema"]
    assert schema["environment"]["POSTGRES_USER"] == postgres["POSTGRES_USER"]
    assert schema["environment"]["SQL_PASSWORD"] == postgres["POSTGRES_PASSWORD"]
    script = REPO / _mounted(schema)[schema["entrypoint"][-1]]
    text = script.read_text()
    for database in (environment["DBNAME"], environment["VISIBILITY_DBNAME"]):
        assert re.search(rf"\b{database}:", text), database
    assert subprocess.run(["sh", "-n", str(script)], check=False).returncode == 0


def test_the_temporal_images_are_pinned_to_one_version() -> None:
    images = [s["image"] for s in _temporal_services().values() if "image" in s]
    versions = {image.rsplit(":", 1)[1] for image in images}
    assert len(versions) == 1
    assert re.fullmatch(r"\d+\.\d+\.\d+", versions.pop())


def test_the_server_dynamic_config_file_is_the_one_mounted() -> None:
    server = _services()["temporal"]
    mounted = _mounted(server)
    relative = server["environment"]["DYNAMIC_CONFIG_FILE_PATH"]
    directory, name = relative.rsplit("/", 1)
    source = mounted[f"/etc/temporal/{directory}"]
    config = yaml.safe_load((REPO / source / name).read_text())
    assert isinstance(config, dict)
    assert config


def test_the_namespace_is_made_once_the_server_answers() -> None:
    services = _services()
    namespace = services["temporal-namespace"]
    assert namespace["depends_on"] == {"temporal": {"condition": "service_healthy"}}
    host, port = namespace["environment"]["TEMPORAL_ADDRESS"].split(":")
    assert host == "temporal"
    assert f"127.0.0.1:{port}:{port}" in services["temporal"]["ports"]
    assert "namespace create -n default" in " ".join(namespace["command"])


def test_the_service_and_the_workers_share_one_temporal_setting() -> None:
    services = _services()
    serve, worker = services["toolloop-temporal"], services["toolloop-worker"]
    shared = (
        "TOOLLOOP_EXECUTOR", "TOOLLOOP_TEMPORAL_ADDRESS", "TOOLLOOP_TEMPORAL_NAMESPACE",
        "TOOLLOOP_TEMPORAL_TASK_QUEUE", "TOOLLOOP_DATABASE_URL",
    )  # fmt: skip
    for name in shared:
        assert serve["environment"][name] == worker["environment"][name], name
    assert serve["environment"]["TOOLLOOP_EXECUTOR"] == "temporal"
    host, port = serve["environment"]["TOOLLOOP_TEMPORAL_ADDRESS"].split(":")
    assert (host, port) == ("temporal", "7233")
    assert serve["environment"]["TOOLLOOP_TEMPORAL_NAMESPACE"] == "default"
    # The service and the workers reach the compose PostgreSQL, as the plain service does.
    assert (
        serve["environment"]["TOOLLOOP_DATABASE_URL"]
        == services["toolloop"]["environment"]["TOOLLOOP_DATABASE_URL"]
    )
    assert all(published.startswith("127.0.0.1:") for published in serve["ports"])


def test_two_workers_run_toolloop_worker_on_the_image_registry() -> None:
    services = _services()
    worker = services["toolloop-worker"]
    assert worker["deploy"]["replicas"] == 2
    assert worker["build"] == "."
    assert worker["command"][:2] == ["toolloop", "worker"]
    registry = worker["command"][worker["command"].index("--registry") + 1]
    assert registry == worker["environment"]["TOOLLOOP_REGISTRIES"]
    dockerfile = (REPO / "Dockerfile").read_text()
    assert f"./registries/{Path(registry).name}" in dockerfile
    # The image has the Temporal SDK the workers and the service need.
    assert re.search(r"pip install .*\[[^\]]*\btemporal\b", dockerfile)
    # The image's health check asks HTTP, which a worker does not serve.
    assert worker["healthcheck"] == {"disable": True}
    assert services["toolloop-temporal"]["depends_on"]["temporal-namespace"] == {
        "condition": "service_completed_successfully"
    }
    assert worker["depends_on"] == {"toolloop-temporal": {"condition": "service_healthy"}}


def _compose_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
    return probe.returncode == 0


@pytest.mark.skipif(
    not _compose_answers(),
    reason="Docker Compose is not installed here (`docker compose version` fails); "
    "the tests above check the profile's structure without it, and nothing runs it live",
)
def test_docker_compose_accepts_the_profile() -> None:
    done = subprocess.run(
        ["docker", "compose", "-f", str(COMPOSE), "--profile", PROFILE, "config", "--quiet"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
