"""Open mode (no keys file) is only safe on a loopback address; `serve` checks before binding."""

from __future__ import annotations

import ipaddress


class UnsafeBindError(Exception):
    pass


def is_loopback_host(host: str) -> bool:
    """127.0.0.0/8, ::1 (also IPv4-mapped) and `localhost`; wildcards and names are not."""
    candidate = host.strip()
    if candidate.lower() in ("localhost", "localhost."):
        return True
    if candidate.startswith("[") and candidate.endswith("]"):
        candidate = candidate[1:-1]
    try:
        address = ipaddress.ip_address(candidate)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def check_open_bind(host: str, keys_configured: bool) -> None:
    """Refuse to serve without keys anywhere but loopback; the message says what to do."""
    if keys_configured or is_loopback_host(host):
        return
    raise UnsafeBindError(
        f"refusing to listen on {host!r} without API keys: anyone who can reach it could run "
        "tools. Set TOOLLOOP_API_KEYS to a keys file (create keys with "
        "`toolloop keys create NAME --scope SCOPE`), or bind to a loopback address "
        "such as 127.0.0.1."
    )
