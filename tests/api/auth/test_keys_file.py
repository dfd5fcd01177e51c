from __future__ import annotations

import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from app.api.auth.keys_file import KeyRequestError, KeysFileError, create_key, load_keys
from app.api.auth.principal import ADMIN, METRICS_READ, PLANS_EXECUTE, RUNS_READ, Principal

GOOD_HASH = "sha256:" + "a" * 64


@pytest.fixture
def keys_path(tmp_path: Path) -> Path:
    return tmp_path / "keys.yml"


def entry_text(key_id: str = "0123456789ab", name: str = "worker", **extra: str) -> str:
    fields = {
        "id": f'"{key_id}"',
        "name": f'"{name}"',
        "hash": f'"{GOOD_HASH}"',
        "scopes": "[runs:read]",
        "created_at": '"2025-01-31T09:00:00+00:00"',
    }
    fields.update(extra)
    lines = [f"{field}: {value}" for field, value in fields.items()]
    return "- " + "\n  ".join(lines) + "\n"


def test_create_key_returns_a_key_that_authenticates_and_stores_only_its_hash(
    keys_path: Path,
) -> None:
    key = create_key(keys_path, "worker", [PLANS_EXECUTE, RUNS_READ])

    text = keys_path.read_text()
    secret = key.split("_", 2)[2]
    assert key not in text
    assert secret not in text
    assert "sha256:" in text
    expected = Principal("worker", frozenset({PLANS_EXECUTE, RUNS_READ}))
    assert load_keys(keys_path).authenticate(key) == expected


def test_the_keys_file_is_private(keys_path: Path) -> None:
    keys_path.write_text("# mine\n")
    keys_path.chmod(0o644)

    create_key(keys_path, "worker", [RUNS_READ])

    assert stat.S_IMODE(keys_path.stat().st_mode) == 0o600


def test_keys_are_appended_and_comments_kept(keys_path: Path) -> None:
    first = create_key(keys_path, "first", [RUNS_READ])
    keys_path.write_text(keys_path.read_text() + "# revoked: old-worker\n")

    second = create_key(keys_path, "second", [ADMIN, ADMIN])

    ring = load_keys(keys_path)
    assert [entry.name for entry in ring.entries] == ["first", "second"]
    assert ring.authenticate(first) == Principal("first", frozenset({RUNS_READ}))
    assert ring.authenticate(second) == Principal("second", frozenset({ADMIN}))
    assert "# revoked: old-worker" in keys_path.read_text()
    assert not list(keys_path.parent.glob("*.tmp"))


def test_a_flow_style_file_is_rewritten_whole(keys_path: Path) -> None:
    keys_path.write_text("[]\n")

    key = create_key(keys_path, "worker", [RUNS_READ])

    assert load_keys(keys_path).authenticate(key) is not None


def test_a_name_that_looks_like_another_yaml_type_stays_a_string(keys_path: Path) -> None:
    create_key(keys_path, "null", [RUNS_READ])
    create_key(keys_path, "123", [RUNS_READ])

    assert [entry.name for entry in load_keys(keys_path).entries] == ["null", "123"]


def test_a_duplicate_name_is_refused_and_the_file_left_alone(keys_path: Path) -> None:
    create_key(keys_path, "worker", [RUNS_READ])
    before = keys_path.read_text()

    with pytest.raises(KeyRequestError, match="already in the keys file"):
        create_key(keys_path, "worker", [ADMIN])

    assert keys_path.read_text() == before


@pytest.mark.parametrize(
    ("name", "scopes", "messages"),
    [
        ("worker", ["runs:write"], ["unknown scope 'runs:write'"]),
        ("worker", [], ["at least one scope"]),
        ("", [RUNS_READ], ["name ''"]),
        ("has space", ["nope", METRICS_READ], ["name 'has space'", "unknown scope 'nope'"]),
    ],
)
def test_bad_requests_are_refused_with_every_problem(
    keys_path: Path, name: str, scopes: list[str], messages: list[str]
) -> None:
    with pytest.raises(KeyRequestError) as caught:
        create_key(keys_path, name, scopes)

    assert len(caught.value.problems) == len(messages)
    for problem, message in zip(caught.value.problems, messages, strict=True):
        assert message in problem
    assert not keys_path.exists()


def test_create_refuses_to_append_to_an_invalid_file(keys_path: Path) -> None:
    keys_path.write_text(entry_text(scopes="[everything]"))

    with pytest.raises(KeysFileError, match="unknown scope 'everything'"):
        create_key(keys_path, "worker", [RUNS_READ])


def test_a_missing_file_is_an_error(keys_path: Path) -> None:
    with pytest.raises(KeysFileError, match="file not found"):
        load_keys(keys_path)


@pytest.mark.parametrize("text", ["", "# no keys yet\n", "[]\n"])
def test_an_empty_file_holds_no_keys(keys_path: Path, text: str) -> None:
    keys_path.write_text(text)

    assert len(load_keys(keys_path)) == 0


def test_load_lists_every_problem(keys_path: Path) -> None:
    keys_path.write_text(
        entry_text()
        + entry_text(key_id="ABC", name="worker", scopes="[]", color='"red"')
        + entry_text(key_id="0123456789ab", name="other", created_at='"yesterday"')
        + entry_text(key_id="ba9876543210", name="worker", hash='"md5:x"', scopes="[admin, x]")
        + entry_text(key_id="cccccccccccc", name="dup", scopes="[admin, admin]")
        + "- just a string\n"
        + '- {id: "dddddddddddd"}\n'
    )

    with pytest.raises(KeysFileError) as caught:
        load_keys(keys_path)

    problems = [problem.removeprefix(f"{keys_path}: ") for problem in caught.value.problems]
    assert problems == [
        "[1]: unknown field 'color'",
        "[1].id: expected 12 lowercase hex digits, got 'ABC'",
        "[1].scopes: expected a non-empty list of scopes",
        "[2].created_at: expected an ISO 8601 timestamp with a UTC offset",
        "[3].hash: expected \"sha256:\" and 64 hex digits, got 'md5:x'",
        "[3].scopes: unknown scope 'x' (known: admin, confirmations:decide, metrics:read, "
        "plans:execute, "
        "router:run, runs:read, runs:read:all)",
        "[4].scopes: a scope is listed twice",
        "[5]: each key is a mapping with id, name, hash, scopes, created_at",
        "[6]: missing field 'name'",
        "[6]: missing field 'hash'",
        "[6]: missing field 'scopes'",
        "[6]: missing field 'created_at'",
    ]


def test_load_reports_duplicate_ids_and_names(keys_path: Path) -> None:
    keys_path.write_text(
        entry_text()
        + entry_text(key_id="0123456789ab", name="other")
        + entry_text(key_id="ba9876543210", name="worker")
    )

    with pytest.raises(KeysFileError) as caught:
        load_keys(keys_path)

    problems = [problem.removeprefix(f"{keys_path}: ") for problem in caught.value.problems]
    assert problems == [
        "[1].id: '0123456789ab' is also [0]'s id",
        "[2].name: 'worker' is also [0]'s name",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("keys: []\n", "must hold a YAML list"),
        ("- &a {}\n", "anchors"),
        ("- id: [unclosed\n", "line"),
    ],
)
def test_unreadable_files_are_errors(keys_path: Path, text: str, message: str) -> None:
    keys_path.write_text(text)

    with pytest.raises(KeysFileError, match=message):
        load_keys(keys_path)


def test_a_naive_timestamp_is_refused(keys_path: Path) -> None:
    keys_path.write_text(entry_text(created_at='"2025-01-31T09:00:00"'))

    with pytest.raises(KeysFileError, match="UTC offset"):
        load_keys(keys_path)


def test_concurrent_creates_all_land(keys_path: Path) -> None:
    names = [f"worker-{n}" for n in range(16)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        created = list(pool.map(lambda name: create_key(keys_path, name, [RUNS_READ]), names))

    ring = load_keys(keys_path)
    assert sorted(entry.name for entry in ring.entries) == sorted(names)
    assert all(ring.authenticate(key) is not None for key in created)
