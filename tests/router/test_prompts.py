from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.router.prompts import PROMPTS, Prompt, PromptError, load_prompts
from tests.router.harness import PROMPTS_DIR


@pytest.fixture
def prompts(tmp_path: Path) -> Path:
    target = tmp_path / "prompts"
    shutil.copytree(PROMPTS_DIR, target)
    return target


def write(directory: Path, name: str, text: str) -> None:
    (directory / f"{name}.md").write_text(text)


def problems(directory: Path) -> list[str]:
    with pytest.raises(PromptError) as caught:
        load_prompts(directory)
    return caught.value.problems


def test_the_repo_prompts_load() -> None:
    loaded = load_prompts(PROMPTS_DIR)
    assert set(loaded.versions()) == set(PROMPTS)
    assert all(v.startswith("v1 sha256:") for v in loaded.versions().values())


def test_a_missing_directory_fails(tmp_path: Path) -> None:
    assert problems(tmp_path / "nowhere") == [
        f"{tmp_path / 'nowhere'}: the prompts directory does not exist"
    ]


def test_every_missing_prompt_is_named(tmp_path: Path) -> None:
    found = problems(tmp_path)
    assert len(found) == len(PROMPTS)
    assert all(p.endswith("missing: the router needs this prompt") for p in found)


def test_rendering_substitutes_once(prompts: Path) -> None:
    write(
        prompts,
        "router.task",
        "---\nprompt: router.task\nversion: 2\nplaceholders: [goal]\n---\nGoal: {{ goal }}\n",
    )
    loaded = load_prompts(prompts)
    assert loaded.render("router.task", goal="{{context}}", context="no") == "Goal: {{context}}\n"
    assert loaded.versions()["router.task"].startswith("v2 ")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("no front matter\n", "must start with YAML front matter"),
        ("---\nprompt: router.task\n", "must start with YAML front matter"),
        ("---\n[1, 2]\n---\nbody {{goal}}\n", "front matter must be a mapping"),
        ("---\nprompt: x: y\n---\nbody\n", "front matter: line 1"),
        (
            "---\nprompt: router.task\nversion: 1\nplaceholders: [goal]\nextra: 1\n---\n{{goal}}\n",
            "unknown key 'extra'",
        ),
        (
            "---\nprompt: final.task\nversion: 1\nplaceholders: [goal]\n---\n{{goal}}\n",
            "prompt must be 'router.task'",
        ),
        (
            "---\nprompt: router.task\nversion: 0\nplaceholders: [goal]\n---\n{{goal}}\n",
            "version must be a positive integer",
        ),
        (
            "---\nprompt: router.task\nversion: 1\nplaceholders: goal\n---\n{{goal}}\n",
            "placeholders must be a list of names",
        ),
        (
            "---\nprompt: router.task\nversion: 1\nplaceholders: [context]\n---\n{{context}}\n",
            "placeholders: must include 'goal'",
        ),
        (
            "---\nprompt: router.task\nversion: 1\nplaceholders: [goal, budgets]\n---\n"
            "{{goal}} {{budgets}}\n",
            "'budgets' is not supplied to this prompt",
        ),
        (
            "---\nprompt: router.task\nversion: 1\nplaceholders: [goal]\n---\n"
            "{{goal}} {{context}}\n",
            "body uses {{context}}, which is not declared",
        ),
        (
            "---\nprompt: router.task\nversion: 1\nplaceholders: [goal, context]\n---\n{{goal}}\n",
            "'context' is declared but the body never uses it",
        ),
        (
            "---\nprompt: router.task\nversion: 1\nplaceholders: [goal]\n---\n{{goal}} {{ bad-\n",
            "'{{' or '}}' that is not a {{name}} placeholder",
        ),
        ("---\nprompt: router.task\nversion: 1\nplaceholders: []\n---\n  \n", "the body is empty"),
    ],
)
def test_an_invalid_prompt_is_refused(prompts: Path, text: str, expected: str) -> None:
    write(prompts, "router.task", text)
    found = problems(prompts)
    assert any(expected in p for p in found), found
    assert all("router.task.md" in p for p in found)


def test_a_file_that_is_not_utf8_is_refused(prompts: Path) -> None:
    (prompts / "final.retry.md").write_bytes(b"---\n\xff\n")
    assert any("not UTF-8" in p for p in problems(prompts))


def test_a_missing_value_is_named(prompts: Path) -> None:
    loaded = load_prompts(prompts)

    with pytest.raises(KeyError, match=r"prompt 'router\.task' needs values for \['context'"):
        loaded.render("router.task", goal="g", observations="o")


def test_a_declared_placeholder_needs_a_value_even_where_the_body_does_not_use_it() -> None:
    # Loaded prompts use every placeholder they declare; one built otherwise still
    # needs a value for each declared placeholder.
    prompt = Prompt("p", 1, frozenset({"used", "unused"}), "Say {{used}}.", "sha256:x")

    assert prompt.render({"used": "hi", "unused": "", "extra": "x"}) == "Say hi."
    with pytest.raises(KeyError, match=r"needs values for \['unused'\]"):
        prompt.render({"used": "hi"})
