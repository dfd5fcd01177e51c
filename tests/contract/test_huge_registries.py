"""Registry files far beyond the size limit: refused after reading just past the limit."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.contract import RegistryError, load_contract
from app.contract.errors import MAX_RENDERED_PROBLEMS
from app.foundation.yaml_loader import DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_NODES
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


def test_a_file_under_the_size_limit_with_too_many_nodes_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "nodes.yml"
    path.write_text("subagents: [" + ",".join(["a"] * (DEFAULT_MAX_NODES + 10)) + "]\n")
    assert path.stat().st_size < DEFAULT_MAX_FILE_BYTES
    problem = only_problem([path])
    assert f"more than {DEFAULT_MAX_NODES} YAML nodes" in problem.message
    assert "line 1" in problem.message


def test_thousands_of_problems_render_bounded_but_are_all_kept(tmp_path: Path) -> None:
    path = tmp_path / "owners.yml"
    path.write_text("subagents:\n" + "".join(f"  owner-{index}: {{}}\n" for index in range(1000)))
    with pytest.raises(RegistryError) as caught:
        load_contract([path])
    assert len(caught.value.problems) >= 1000
    lines = str(caught.value).splitlines()
    assert len(lines) == MAX_RENDERED_PROBLEMS + 1
    assert (
        lines[-1] == f"... and {len(caught.value.problems) - MAX_RENDERED_PROBLEMS} more problem(s)"
    )
