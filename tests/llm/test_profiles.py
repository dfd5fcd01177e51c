from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from app.llm.errors import UnknownProfileError
from app.llm.profiles import (
    DEFAULT_TIMEOUT_S,
    MAX_PROFILES_FILE_BYTES,
    ModelProfile,
    ProfilesError,
    load_profiles,
)

DESIGN_EXAMPLE = """
profiles:
  router-small:
    provider: openai
    base_url: http://127.0.0.1:11434/v1
    model: qwen2.5:7b
    api_key_env: OPENAI_API_KEY
    temperature: 0
    max_tokens: 1024
    timeout_s: 60
  final-large:
    provider: anthropic
    base_url: https://api.anthropic.com/
    model: claude-sonnet-4-5
    api_key_env: ANTHROPIC_API_KEY
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "profiles.yml"
    path.write_text(textwrap.dedent(text))
    return path


def problems_of(path: Path) -> list[str]:
    with pytest.raises(ProfilesError) as caught:
        load_profiles(path)
    assert str(caught.value) == "\n".join(str(p) for p in caught.value.problems)
    return [str(problem) for problem in caught.value.problems]


def profile_file(tmp_path: Path, body: str) -> Path:
    lines = "\n".join(f"    {line}" for line in textwrap.dedent(body).strip().splitlines())
    return write(tmp_path, f"profiles:\n  p:\n{lines}\n")


VALID = """
provider: openai
base_url: http://llm.test/v1
model: m
"""


def test_loads_the_design_example(tmp_path: Path) -> None:
    profiles = load_profiles(write(tmp_path, DESIGN_EXAMPLE))

    assert list(profiles) == ["router-small", "final-large"]
    assert profiles["router-small"] == ModelProfile(
        name="router-small",
        provider="openai",
        base_url="http://127.0.0.1:11434/v1",
        model="qwen2.5:7b",
        api_key_env="OPENAI_API_KEY",
        temperature=0.0,
        max_tokens=1024,
        timeout_s=60.0,
    )
    final = profiles.require("final-large")
    assert final.provider == "anthropic"
    assert final.base_url == "https://api.anthropic.com"
    assert final.temperature is None
    assert final.max_tokens is None
    assert final.timeout_s == DEFAULT_TIMEOUT_S


def test_profiles_are_read_only(tmp_path: Path) -> None:
    profiles = load_profiles(profile_file(tmp_path, VALID))

    with pytest.raises(TypeError):
        profiles["q"] = profiles["p"]  # type: ignore[index]
    with pytest.raises(AttributeError):
        profiles["p"].model = "other"  # type: ignore[misc]


def test_an_unknown_profile_name_is_an_error_naming_the_defined_ones(tmp_path: Path) -> None:
    profiles = load_profiles(profile_file(tmp_path, VALID))

    with pytest.raises(UnknownProfileError, match=r"unknown model profile 'big' \(defined: p\)"):
        profiles.require("big")
    assert "big" not in profiles


def test_api_key_env_is_optional(tmp_path: Path) -> None:
    assert load_profiles(profile_file(tmp_path, VALID))["p"].api_key_env is None


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("colour: blue", "profiles.p.colour: unknown key"),
        (
            "provider: mistral",
            "profiles.p.provider: must be one of openai, anthropic, replay, not 'mistral'",
        ),
        ("base_url: ftp://llm.test", "profiles.p.base_url: must be an http:// or https:// URL"),
        ("base_url: llm.test/v1", "profiles.p.base_url: must be an http:// or https:// URL"),
        ("base_url: 'https://u:pw@llm.test'", "profiles.p.base_url: must not embed credentials"),
        ("base_url: 'https://llm.test/?a=1'", "profiles.p.base_url: must not have a query"),
        ("model: ''", "profiles.p.model: must have at least 1 character"),
        ("model: 7", "profiles.p.model: must be a valid string"),
        ("api_key_env: 'MY-KEY'", "profiles.p.api_key_env: must be an environment variable name"),
        ("timeout_s: 0", "profiles.p.timeout_s: must be greater than 0"),
        ("timeout_s: -5", "profiles.p.timeout_s: must be greater than 0"),
        ("timeout_s: '60'", "profiles.p.timeout_s: must be a valid number"),
        ("max_tokens: 0", "profiles.p.max_tokens: must be greater than 0"),
        ("max_tokens: true", "profiles.p.max_tokens: must be a valid integer"),
        ("max_tokens: 1.5", "profiles.p.max_tokens: must be a valid integer"),
        ("temperature: -0.1", "profiles.p.temperature: must be greater than or equal to 0"),
        ("temperature: 2.5", "profiles.p.temperature: must be less than or equal to 2"),
    ],
)
def test_each_invalid_value_is_reported_with_its_key_path(
    tmp_path: Path, extra: str, expected: str
) -> None:
    key = extra.split(":", 1)[0]
    body = "\n".join(line for line in VALID.strip().splitlines() if not line.startswith(key))
    path = profile_file(tmp_path, f"{body}\n{extra}")

    (problem,) = problems_of(path)
    assert problem.startswith(f"{path}: {expected}")


@pytest.mark.parametrize("key", ["provider", "base_url", "model"])
def test_required_keys_are_required(tmp_path: Path, key: str) -> None:
    body = "\n".join(line for line in VALID.strip().splitlines() if not line.startswith(key))
    path = profile_file(tmp_path, body)

    assert problems_of(path) == [f"{path}: profiles.p.{key}: required key is missing"]


def test_temperature_above_one_is_refused_for_anthropic(tmp_path: Path) -> None:
    path = profile_file(
        tmp_path, "provider: anthropic\nbase_url: https://a.test\nmodel: m\ntemperature: 1.5"
    )

    assert problems_of(path) == [
        f"{path}: profiles.p.temperature: must be at most 1 for provider anthropic"
    ]


def test_every_problem_is_listed_at_once(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        profiles:
          a:
            provider: mistral
            model: m
            timeout_s: 0
          b:
            provider: openai
            base_url: http://llm.test
            model: m
            max_tokens: -1
            seed: 3
        version: 2
        """,
    )

    assert problems_of(path) == [
        f"{path}: profiles.a.provider: must be one of openai, anthropic, replay, not 'mistral'",
        f"{path}: profiles.a.base_url: required key is missing",
        f"{path}: profiles.a.timeout_s: must be greater than 0",
        f"{path}: profiles.b.max_tokens: must be greater than 0",
        f"{path}: profiles.b.seed: unknown key",
        f"{path}: version: unknown key",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "the file is empty"),
        ("profiles: {}\n", "profiles: must define at least one profile"),
        ("profiles: [a, b]\n", "profiles: must be a mapping"),
        ("- profiles\n", "must be a mapping"),
        ("other: 1\n", "profiles: required key is missing"),
    ],
)
def test_the_file_shape_is_checked(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text)

    assert problems_of(path)[0].startswith(f"{path}: {expected}")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("profiles:\n  p: {}\n  p: {}\n", "duplicate key 'p'"),
        ("profiles:\n  p: &base {}\n  q: *base\n", "anchors (&name) are not allowed"),
        ("profiles: !!python/object:os.system {}\n", "is not allowed"),
        ("profiles: [unclosed\n", "line"),
    ],
)
def test_unsafe_or_broken_yaml_is_refused(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text)

    (problem,) = problems_of(path)
    assert problem.startswith(f"{path}: ")
    assert expected in problem


def test_a_missing_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "absent.yml"

    assert problems_of(path) == [f"{path}: file not found"]


def test_an_oversized_file_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, VALID + "#" * MAX_PROFILES_FILE_BYTES)

    (problem,) = problems_of(path)
    assert "larger than" in problem


def test_prices_per_million_tokens_become_nano_units_per_token(tmp_path: Path) -> None:
    body = VALID + 'prices: {input_per_million: "0.15", output_per_million: 15}\n'

    profile = load_profiles(profile_file(tmp_path, body))["p"]

    assert profile.prices is not None
    assert (profile.prices.input_nanos, profile.prices.output_nanos) == (150, 15_000)
    assert profile.prices.cost_nanos(1_000, 100) == 1_650_000


@pytest.mark.parametrize(
    ("prices", "expected"),
    [
        ('{input_per_million: "0.1234", output_per_million: 1}', "at most 3 decimals"),
        ("{input_per_million: -1, output_per_million: 1}", "a finite amount, zero or more"),
        ('{input_per_million: "cheap", output_per_million: 1}', "is not a decimal number"),
        ('{input_per_million: "NaN", output_per_million: 1}', "a finite amount, zero or more"),
        ("{input_per_million: true, output_per_million: 1}", "must be a decimal number"),
    ],
)
def test_an_invalid_price_names_its_key(tmp_path: Path, prices: str, expected: str) -> None:
    path = profile_file(tmp_path, VALID + f"prices: {prices}\n")

    (problem,) = problems_of(path)
    assert problem.startswith(f"{path}: profiles.p.prices.input_per_million: ")
    assert expected in problem


def test_prices_need_both_directions_and_nothing_else(tmp_path: Path) -> None:
    path = profile_file(tmp_path, VALID + "prices: {input_per_million: 1, per: 1000}\n")

    assert sorted(p.split(": ", 1)[1] for p in problems_of(path)) == [
        "profiles.p.prices.output_per_million: required key is missing",
        "profiles.p.prices.per: unknown key",
    ]
