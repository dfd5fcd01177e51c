"""Registry files far beyond the size limit: refused after reading just past the limit."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.contract.yaml_loader import DEFAULT_MAX_FILE_BYTES
from tests.contract.helpers import only_problem

LIMIT_MESSAGE = f"file is larger than the {DEFAULT_MAX_FILE_BYTES}-byte limit"


def test_a_sparse_many_gigabyte_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    path = tmp_path / "huge.yml"
    with path.open("wb") as stream:
        stream.truncate(64 * 1024**3)  # sparse: no disk used, but 64 GiB to read
    problem = only_problem([path])
    assert (problem.file, problem.message) == (str(path), LIMIT_MESSAGE)


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_an_endless_stream_is_refused(device: str) -> None:
    if not Path(device).exists():
        pytest.skip(f"{device} is not available here")
    assert only_problem([Path(device)]).message == LIMIT_MESSAGE


def test_a_file_one_byte_over_the_limit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "edge.yml"
    path.write_text("a: '" + "x" * (DEFAULT_MAX_FILE_BYTES - 5) + "'\n")  # limit + 1 bytes
    assert path.stat().st_size == DEFAULT_MAX_FILE_BYTES + 1
    assert only_problem([path]).message == LIMIT_MESSAGE
