from __future__ import annotations

import pytest

from app.api.auth.loopback import UnsafeBindError, check_open_bind, is_loopback_host


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "LOCALHOST", "::ffff:127.0.0.1"],
)
def test_loopback_hosts(host: str) -> None:
    assert is_loopback_host(host)


@pytest.mark.parametrize(
    "host",
    [
        "0.0.0.0",
        "::",
        "[::]",
        "",
        "10.0.0.1",
        "192.168.1.10",
        "example.com",
        "128.0.0.1",
        "fe80::1",
    ],
)
def test_other_hosts_are_not_loopback(host: str) -> None:
    assert not is_loopback_host(host)


def test_open_mode_is_refused_off_loopback_and_says_why() -> None:
    with pytest.raises(UnsafeBindError, match="TOOLLOOP_API_KEYS") as caught:
        check_open_bind("0.0.0.0", keys_configured=False)

    assert "0.0.0.0" in str(caught.value)
    assert "127.0.0.1" in str(caught.value)


def test_binding_is_allowed_with_keys_or_on_loopback() -> None:
    check_open_bind("0.0.0.0", keys_configured=True)
    check_open_bind("127.0.0.1", keys_configured=False)
