"""The API-keys file (`TOOLLOOP_API_KEYS`): YAML, hashes only, one list item per key.

    # ToolLoop API keys: hashes only. Add keys with `toolloop keys create`;
    # delete an item to revoke its key (takes effect on restart).
    - id: "3f9a0c1b2d4e"
      name: "ci-worker"
      hash: "sha256:<64 hex>"
      scopes: ["plans:execute", "runs:read"]
      created_at: "2025-01-31T09:00:00+00:00"

It is read with the registries' safe YAML loader, so the same rules hold (no
tags, anchors or duplicate keys). Every entry has exactly these fields; names
are 1-64 characters of letters, digits and `._@:-` because they appear in logs
and on runs. `create_key` appends under a lock via a temporary file and
`os.replace`, leaves the file mode 0600, and keeps the existing text
(comments included) whenever the file is a plain block list.

KeysError
 ├── KeysFileError       the file cannot be read or is invalid; lists every problem
 └── KeyRequestError     the name or scopes asked of `create_key` are invalid
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.api.auth.entries import KNOWN_SCOPES, NAME_PATTERN, parse_entries, unknown_scope
from app.api.auth.keyring import KeyEntry, KeyRing, new_key, new_key_id
from app.api.auth.principal import SCOPES
from app.foundation.yaml_loader import YAMLLoadError, load_yaml_file, parse_yaml

_HEADER = (
    "# ToolLoop API keys: hashes only. Add keys with `toolloop keys create`;\n"
    "# delete an item to revoke its key (takes effect on restart).\n"
)


class KeysError(Exception):
    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


class KeysFileError(KeysError):
    def __init__(self, path: Path, problems: Sequence[str]) -> None:
        self.path = path
        super().__init__([f"{path}: {problem}" for problem in problems])


class KeyRequestError(KeysError):
    pass


def load_keys(path: Path) -> KeyRing:
    try:
        data = load_yaml_file(path)
    except YAMLLoadError as exc:
        raise KeysFileError(path, [str(exc)]) from None
    return KeyRing(_entries(path, data))


def create_key(path: Path, name: str, scopes: Iterable[str]) -> str:
    """Append a new key's hash to the file (created if missing) and return the key itself."""
    if isinstance(scopes, str):
        raise TypeError("scopes is a collection of scope names, not one string")
    wanted = sorted(set(scopes))
    with _locked(path):
        text, entries = _read_for_update(path)
        _check_request(name, wanted, entries)
        taken = {entry.id for entry in entries}
        key_id = new_key_id()
        while key_id in taken:
            key_id = new_key_id()
        key, key_hash = new_key(key_id)
        now = datetime.now(UTC).replace(microsecond=0)
        entry = KeyEntry(key_id, name, key_hash, frozenset(wanted), now)
        _replace(path, _appended(path, text, entries, entry))
    return key


def _check_request(name: str, scopes: Sequence[str], entries: Sequence[KeyEntry]) -> None:
    problems = []
    if not NAME_PATTERN.fullmatch(name):
        problems.append(f"name {name!r}: use 1-64 letters, digits or ._@:-")
    elif any(entry.name == name for entry in entries):
        problems.append(f"name {name!r} is already in the keys file")
    if not scopes:
        problems.append(f"give at least one scope ({KNOWN_SCOPES})")
    problems.extend(unknown_scope(scope) for scope in scopes if scope not in SCOPES)
    if problems:
        raise KeyRequestError(problems)


def _read_for_update(path: Path) -> tuple[str, list[KeyEntry]]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        return "", []
    except (OSError, UnicodeDecodeError) as exc:
        raise KeysFileError(path, [f"cannot read the file: {exc}"]) from None
    return text, _parse_text(path, text)


def _parse_text(path: Path, text: str) -> list[KeyEntry]:
    try:
        data = parse_yaml(text)
    except YAMLLoadError as exc:
        raise KeysFileError(path, [str(exc)]) from None
    return _entries(path, data)


def _appended(path: Path, text: str, entries: list[KeyEntry], entry: KeyEntry) -> str:
    base = text if not text or text.endswith("\n") else text + "\n"
    candidate = (base or _HEADER) + _render(entry)
    with suppress(KeysFileError):
        if _parse_text(path, candidate) == [*entries, entry]:
            return candidate
    # Not a plain block list (e.g. flow style): rewrite it whole.
    return _HEADER + "".join(_render(e) for e in [*entries, entry])


def _render(entry: KeyEntry) -> str:
    # JSON strings are valid YAML scalars and keep names such as "null" strings.
    return (
        f"- id: {json.dumps(entry.id)}\n"
        f"  name: {json.dumps(entry.name)}\n"
        f"  hash: {json.dumps(entry.hash)}\n"
        f"  scopes: {json.dumps(sorted(entry.scopes))}\n"
        f"  created_at: {json.dumps(entry.created_at.isoformat())}\n"
    )


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    try:
        lock = os.open(path.with_name(f".{path.name}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise KeysFileError(path, [f"cannot lock the file: {exc.strerror or exc}"]) from None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
    finally:
        os.close(lock)


def _replace(path: Path, text: str) -> None:
    try:
        _write_atomically(path, text)
    except OSError as exc:
        raise KeysFileError(path, [f"cannot write the file: {exc.strerror or exc}"]) from None


def _write_atomically(path: Path, text: str) -> None:
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temp, 0o600)
        os.replace(temp, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _entries(path: Path, data: Any) -> list[KeyEntry]:
    entries, problems = parse_entries(data)
    if problems:
        raise KeysFileError(path, problems)
    return entries
