"""`toolloop serve` believes X-Forwarded-For only from the proxies the operator names.

Over real HTTP: the proxy headers are uvicorn's, applied outside the app.
The failed-key throttle keys on the address the server believes, so a
made-up header must not give a client a fresh bucket.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from app.api.auth import PLANS_EXECUTE, create_key
from app.cli import _build_parser, _settings
from tests.live_server import live_server
from tests.test_cli import EXAMPLE_REGISTRY

BAD_KEY = {"Authorization": "Bearer tl_000000000000_" + "A" * 43}


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    keys = tmp_path / "keys.yml"
    create_key(keys, "worker", [PLANS_EXECUTE])
    return {
        "TOOLLOOP_REGISTRIES": str(EXAMPLE_REGISTRY),
        "TOOLLOOP_API_KEYS": str(keys),
        "TOOLLOOP_AUTH_FAILURE_BURST": "2",
        "TOOLLOOP_AUTH_FAILURES_PER_MINUTE": "0.001",
        # uvicorn's own variable: ToolLoop's setting decides, not this.
        "FORWARDED_ALLOW_IPS": "*",
        **extra,
    }


def _bad_key_from(client: httpx.Client, forwarded_for: str) -> int:
    headers = {**BAD_KEY, "X-Forwarded-For": forwarded_for}
    return client.get("/tools", headers=headers).status_code


def test_a_made_up_forwarded_for_does_not_reset_the_failed_key_throttle(
    tmp_path: Path,
) -> None:
    with (
        live_server(tmp_path, [], env=_env(tmp_path)) as base,
        httpx.Client(base_url=base, timeout=10) as client,
    ):
        statuses = [_bad_key_from(client, f"203.0.113.{n}") for n in range(4)]
    assert statuses == [401, 401, 429, 429]


def test_the_named_proxies_forwarded_for_is_the_client(tmp_path: Path) -> None:
    env = _env(tmp_path, TOOLLOOP_FORWARDED_ALLOW_IPS="127.0.0.1, ::1")
    with (
        live_server(tmp_path, [], env=env) as base,
        httpx.Client(base_url=base, timeout=10) as client,
    ):
        others = [_bad_key_from(client, f"203.0.113.{n}") for n in range(4)]
        same = [_bad_key_from(client, "198.51.100.7") for _ in range(3)]
    assert others == [401, 401, 401, 401]
    assert same == [401, 401, 429]


def test_the_flag_names_the_proxies_too(tmp_path: Path) -> None:
    with (
        live_server(tmp_path, ["--forwarded-allow-ips", "127.0.0.0/8"], env=_env(tmp_path)) as base,
        httpx.Client(base_url=base, timeout=10) as client,
    ):
        others = [_bad_key_from(client, f"203.0.113.{n}") for n in range(3)]
    assert others == [401, 401, 401]


def test_the_serve_flags_reach_the_settings() -> None:
    args = _build_parser().parse_args(
        [
            "serve",
            "--forwarded-allow-ips",
            "10.0.0.1, 10.1.0.0/16",
            "--cors-origins",
            "https://console.example,http://localhost:3000",
        ]
    )
    settings = _settings(args)
    assert settings.forwarded_allow_ips == ["10.0.0.1", "10.1.0.0/16"]
    assert settings.cors_origins == ["https://console.example", "http://localhost:3000"]
