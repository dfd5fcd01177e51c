from __future__ import annotations

import copy
import enum
from types import MappingProxyType
from typing import Any

import orjson
import pytest

from app.api.auth.keyring import new_key, new_key_id
from app.foundation.redaction import (
    _LITERALS,
    _PATTERNS,
    DEFAULT_REDACTOR,
    REDACTED,
    Redactor,
    may_hold_secret,
    redact_text,
)

OPENAI_KEY = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0U1v2W3x4"
PROJECT_KEY = "sk-proj-" + "Ab12_Cd34-Ef56Gh78Ij90Kl12Mn34Op56"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
TOOLLOOP_KEY = "tl_0123456789ab_" + "Zm9vYmFyYmF6cXV4LWJhel9xdXV4LWZvb2JhcmJhenF1eA"
PRIVATE_KEY = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n"
    "-----END RSA PRIVATE KEY-----"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer abcdef123456.xyz", f"Authorization: Bearer {REDACTED}"),
        ("bearer 0123456789abcdef==", f"bearer {REDACTED}"),
        ("BEARER\tAbCdEfGh12345678", f"BEARER\t{REDACTED}"),
        (f"key={OPENAI_KEY};", f"key={REDACTED};"),
        (f"use {PROJECT_KEY} now", f"use {REDACTED} now"),
        (f"token {JWT} end", f"token {REDACTED} end"),
        (f"Bearer {JWT}", f"Bearer {REDACTED}"),
        ("id AKIAIOSFODNN7EXAMPLE here", f"id {REDACTED} here"),
        ("ASIAY34FZKBOKMUTVV7A", REDACTED),
        (TOOLLOOP_KEY, REDACTED),
        (f"X-Request-ID: req-{TOOLLOOP_KEY}.1", f"X-Request-ID: req-{REDACTED}.1"),
        (f"before\n{PRIVATE_KEY}\nafter", f"before\n{REDACTED}\nafter"),
        (
            "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEF\n-----END PRIVATE KEY-----",
            REDACTED,
        ),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA", REDACTED),
        (
            "postgresql+psycopg://app:s3cr3t@db.internal:5432/main",
            f"postgresql+psycopg://app:{REDACTED}@db.internal:5432/main",
        ),
        ("redis://:hunter2@cache:6379/0", f"redis://:{REDACTED}@cache:6379/0"),
        (
            "a https://u:p1@h1/x and ftp://v:p2@h2",
            f"a https://u:{REDACTED}@h1/x and ftp://v:{REDACTED}@h2",
        ),
    ],
)
def test_redact_text_replaces_secret_patterns(text: str, expected: str) -> None:
    assert redact_text(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "plain words only",
        "the bearer of bad news",
        "Bearer",
        "Bearer short",
        "sk-tooshort",
        "task-0123456789abcdefghijklmnop",
        "eyJhbGciOiJIUzI1NiJ9",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0",
        "AKIAIOSFODNN7EXAMPL",
        "tl_0123456789ab_short",
        "tl_0123456789AB_" + "A" * 43,
        "ctl_limit_reached",
        "AKIAIOSFODNN7EXAMPLE1",
        "xAKIAIOSFODNN7EXAMPLE",
        "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0\n-----END PUBLIC KEY-----",
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
        "https://db.internal:5432/main",
        "https://user@host/path",
        "https://host:8080/path?email=a@b.example",
        "https://host:8080?next=x@y",
        "mailto:someone@example.com",
        f"Bearer {REDACTED}",
        f"redis://:{REDACTED}@cache",
    ],
)
def test_redact_text_leaves_near_misses_alone(text: str) -> None:
    assert redact_text(text) == text


def test_redact_text_is_idempotent() -> None:
    text = f"Bearer {OPENAI_KEY} https://u:pw@h {JWT} AKIAIOSFODNN7EXAMPLE"
    once = redact_text(text)
    assert redact_text(once) == once
    assert OPENAI_KEY not in once
    assert "pw@" not in once


def test_key_names_match_exactly_and_case_insensitively() -> None:
    redactor = Redactor(["Password", "api_key"])
    data = {
        "password": "hunter2",
        "PASSWORD": {"nested": "whole subtree"},
        "API_KEY": 12345,
        "password_hint": "pet name",
        "user": "alice",
    }
    assert redactor.redact(data) == {
        "password": REDACTED,
        "PASSWORD": REDACTED,
        "API_KEY": REDACTED,
        "password_hint": "pet name",
        "user": "alice",
    }


def test_key_names_apply_at_any_depth_in_lists_and_dicts() -> None:
    redactor = Redactor(["token"])
    data = {"items": [{"token": "t1", "n": 1}, [{"deeper": {"token": None}}]], "token2": "x"}
    assert redactor.redact(data) == {
        "items": [{"token": REDACTED, "n": 1}, [{"deeper": {"token": REDACTED}}]],
        "token2": "x",
    }


def test_patterns_apply_to_nested_values_and_keys() -> None:
    data = {
        "headers": {"Authorization": "Bearer abcdefgh12345678"},
        "list": ["ok", OPENAI_KEY, ("AKIAIOSFODNN7EXAMPLE", 3)],
        OPENAI_KEY: "value",
    }
    assert DEFAULT_REDACTOR.redact(data) == {
        "headers": {"Authorization": f"Bearer {REDACTED}"},
        "list": ["ok", REDACTED, (REDACTED, 3)],
        REDACTED: "value",
    }


def test_input_is_never_mutated() -> None:
    data: dict[str, Any] = {
        "secret": "x",
        "nested": {"url": "https://u:pw@h", "list": [OPENAI_KEY, {"secret": [1, 2]}]},
    }
    before = copy.deepcopy(data)
    redacted = Redactor(["secret"]).redact(data)
    assert data == before
    assert redacted["nested"]["list"][1] == {"secret": REDACTED}


def test_unchanged_data_is_returned_without_copying() -> None:
    data = {"a": [1, 2.5, True, None, "text"], "b": {"c": "d"}}
    assert DEFAULT_REDACTOR.redact(data) is data


def test_only_changed_branches_are_copied() -> None:
    untouched = {"c": "d"}
    data = {"a": untouched, "b": [f"{OPENAI_KEY}"]}
    redacted = DEFAULT_REDACTOR.redact(data)
    assert redacted is not data
    assert redacted["a"] is untouched
    assert redacted == {"a": {"c": "d"}, "b": [REDACTED]}


@pytest.mark.parametrize("value", [None, True, 0, 1.5, 10**30])
def test_non_string_scalars_pass_through(value: object) -> None:
    assert DEFAULT_REDACTOR.redact(value) is value


def test_deep_nesting_is_handled() -> None:
    depth = 300
    data: Any = {"password": "p", "leaf": "Bearer abcdefgh12345678"}
    for _ in range(depth):
        data = {"k": [data]}
    redacted = Redactor(["password"]).redact(data)
    for _ in range(depth):
        redacted = redacted["k"][0]
    assert redacted == {"password": REDACTED, "leaf": f"Bearer {REDACTED}"}


def test_default_redactor_is_shared_and_has_no_key_names() -> None:
    assert Redactor.default() is DEFAULT_REDACTOR
    assert DEFAULT_REDACTOR.redact({"password": "plain"}) == {"password": "plain"}


def test_self_referencing_data_is_refused() -> None:
    data: dict[str, Any] = {"a": 1}
    data["self"] = data
    with pytest.raises(ValueError, match="self-referencing"):
        DEFAULT_REDACTOR.redact(data)


def test_other_mappings_and_tuples_are_walked() -> None:
    data = MappingProxyType({"password": "p", "pair": ("x", OPENAI_KEY)})
    assert Redactor(["password"]).redact(data) == {"password": REDACTED, "pair": ("x", REDACTED)}


def test_non_json_objects_pass_through() -> None:
    marker = object()
    assert DEFAULT_REDACTOR.redact([marker])[0] is marker


class _Text(str):
    pass


class _Color(enum.StrEnum):
    TOKEN = "Bearer abcdefghijklmnop"
    PLAIN = "plain"


_SECRET_CASES: list[Any] = [
    {"text": "hello", "n": 1, "f": 1.5, "ok": True, "none": None},
    {"rows": [{"id": i, "name": f"item {i}"} for i in range(5)]},
    {"auth": "Bearer abcdefghijklmnop"},
    {"Bearer abcdefghijklmnop": "a secret in a key"},
    [{"url": "https://user:hunter2@example.com/x"}],
    {"nested": [[{"k": "sk-" + "a" * 24}]]},
    {"jwt": "eyJhbGciOi.eyJzdWIiOi.c2lnbmF0dXJl"},
    {"key": "AKIAABCDEFGHIJKLMNOP"},
    {"key": "ASIAABCDEFGHIJKLMNOP"},
    {"auth": "BEARER abcdefghijklmnop"},
    {"pem": "-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----"},
    {"sub": _Text("Bearer abcdefghijklmnop")},
    {_Text("Bearer abcdefghijklmnop"): 1},
    {"enum": _Color.TOKEN, "other": _Color.PLAIN},
    {1: "Bearer abcdefghijklmnop"},
    {"t": ("Bearer abcdefghijklmnop", 1)},
    {'quote"d': "line\nbreak \\ Bearer abcdefghijklmnop"},
    {"near": "sk- and eyJ and :// and bearer"},
    {"proxy": MappingProxyType({"auth": "Bearer abcdefghijklmnop"})},
    {"nan": float("nan"), "big": 2**70, "text": "Bearer abcdefghijklmnop"},
    ["\ud800 lone surrogate", "Bearer abcdefghijklmnop"],
]


@pytest.mark.parametrize("value", _SECRET_CASES)
def test_the_json_shortcut_agrees_with_the_walk(value: Any) -> None:
    # `redact` first tries to prove a container clean from its JSON text; `_redact`
    # is the walk alone. Both must give the same result, and unchanged data back
    # as the same object.
    walked = DEFAULT_REDACTOR._redact(value)
    redacted = DEFAULT_REDACTOR.redact(value)
    assert redacted == walked
    if walked == value:
        assert redacted is value


def test_the_json_shortcut_checks_every_literal_the_patterns_need() -> None:
    needed = {literal for literals, _, _ in _PATTERNS for literal in literals}
    assert needed == set(_LITERALS)
    for literal in _LITERALS:
        assert may_hold_secret(f"x{literal}x")
        # A container holding just the literal is walked, not waved through.
        value = {"v": f"x{literal}x"}
        assert DEFAULT_REDACTOR.redact(value) == DEFAULT_REDACTOR._redact(value)


@pytest.mark.parametrize("literal", _LITERALS)
def test_the_shortcut_walks_every_container_whose_json_shows_a_literal(
    literal: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `redact` inlines `may_hold_secret`: each literal must send the value to the walk.
    walked: list[Any] = []
    monkeypatch.setattr(Redactor, "_redact", lambda self, value: walked.append(value) or value)
    DEFAULT_REDACTOR.redact({"v": f"x{literal}x"})
    DEFAULT_REDACTOR.redact({"v": "nothing to see"})
    assert walked == [{"v": f"x{literal}x"}]


class _Colour(enum.StrEnum):
    RED = "red"


class _Text(str):
    pass


@pytest.mark.parametrize(
    ("redactor", "value", "written"),
    [
        (Redactor(), {"text": "hello", "n": [1.5, None, True, 1e-7]}, True),
        (Redactor(), ["ünïcode", {"a": {}}], True),
        (Redactor(), {"auth": "Bearer sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2"}, False),
        (Redactor(["password"]), {"password": "hunter2", "text": "hello"}, False),
        (Redactor(["password"]), {"text": "hello"}, False),
        (Redactor(), {"colour": _Colour.RED}, True),
        (Redactor(), {"text": _Text("hello")}, False),
        (Redactor(), "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2", False),
        (Redactor(), 42, False),
    ],
    ids=[
        "plain",
        "a list",
        "a secret",
        "key names to hide",
        "key names, none here",
        "an enum member, written by value",
        "a subclass of str",
        "a string",
        "a number",
    ],
)
def test_redact_with_json_is_redact_and_the_json_it_wrote_on_the_way(
    redactor: Redactor, value: Any, written: bool
) -> None:
    redacted, text = redactor.redact_with_json(value)

    assert redacted == redactor.redact(value)
    if written:
        assert redacted is value
        assert text == orjson.dumps(value)
    else:
        assert text is None


def test_a_key_minted_by_toolloop_is_redacted() -> None:
    key, _ = new_key(new_key_id())
    assert redact_text(f"key={key}") == f"key={REDACTED}"
    assert DEFAULT_REDACTOR.redact({"args": [key]}) == {"args": [REDACTED]}
