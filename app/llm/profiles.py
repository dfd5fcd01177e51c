"""Model profiles: which provider, server and model the router calls, read from
the profiles file (`TOOLLOOP_PROFILES`).

    profiles:
      router-small:
        provider: openai            # openai | anthropic
        base_url: http://127.0.0.1:11434/v1
        model: qwen2.5:7b
        api_key_env: OPENAI_API_KEY # optional: the variable holding the key
        temperature: 0              # optional, 0..2 (anthropic: 0..1)
        max_tokens: 1024            # optional
        timeout_s: 60               # optional
        prices:                     # optional: per million tokens, at most 3 decimals
          input_per_million: "0.15"
          output_per_million: "0.60"
      tour-replay:
        provider: replay            # the replies a run recorded, no model server
        cassette: tour.cassette.jsonl   # a cassette file, relative to this file;
        # or run_id: <a recorded run's id>  (exactly one of the two)

Nothing about a profile is implied: provider, base_url and model are required
and no profile exists unless the file defines it. The one server-side default is
`timeout_s`, DEFAULT_TIMEOUT_S (60 s) per request attempt, because a request
without any deadline is never acceptable; it carries no App meaning.

Prices are in whatever unit the operator chooses (one unit for every profile);
they make each request's cost known to the usage ledger and to `max_cost`
budgets. A profile without them records tokens only.

The API key itself never lives here: `api_key_env` names an environment
variable that the client reads at call time.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Literal, get_args
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)
from pydantic_core import ErrorDetails

from app.contract.errors import ContractProblem
from app.foundation.money import MAX_PRICE_DECIMALS, AmountError, parse_amount
from app.foundation.yaml_loader import YAMLLoadError, load_yaml_file
from app.llm.errors import UnknownProfileError
from app.llm.prices import Prices

DEFAULT_TIMEOUT_S = 60.0
MAX_PROFILES_FILE_BYTES = 256 * 1024

Provider = Literal["openai", "anthropic", "replay"]
PROVIDERS: tuple[str, ...] = get_args(Provider)
REPLAY = "replay"
_MAX_TEMPERATURE = {"openai": 2.0, "anthropic": 1.0}
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True)
class ModelProfile:
    name: str
    provider: Provider
    base_url: str
    model: str
    api_key_env: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    # A replay profile's source: a cassette file, or a recorded run's id.
    cassette: Path | None = None
    replay_run: str | None = None
    prices: Prices | None = None

    @property
    def replays(self) -> bool:
        return self.provider == REPLAY


class Profiles(Mapping[str, ModelProfile]):
    """The profiles of one file by name; read-only."""

    __slots__ = ("_by_name", "source")

    def __init__(self, profiles: Mapping[str, ModelProfile], source: str = "") -> None:
        self._by_name: Mapping[str, ModelProfile] = MappingProxyType(dict(profiles))
        self.source = source

    def __getitem__(self, name: str) -> ModelProfile:
        return self._by_name[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def __repr__(self) -> str:
        return f"Profiles({sorted(self._by_name)!r}, source={self.source!r})"

    def require(self, name: str) -> ModelProfile:
        """The named profile, or UnknownProfileError naming the defined ones."""
        try:
            return self._by_name[name]
        except KeyError:
            raise UnknownProfileError(name, sorted(self._by_name)) from None


class ProfilesError(Exception):
    """Every problem found in a profiles file, one `file: key.path: message` line each."""

    def __init__(self, problems: list[ContractProblem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(problem) for problem in problems))


_Name = Annotated[str, Field(min_length=1)]


def _price(value: Any) -> Decimal:
    try:
        return parse_amount(value, decimals=MAX_PRICE_DECIMALS)
    except AmountError as exc:
        raise ValueError(str(exc)) from None


_Price = Annotated[Decimal, BeforeValidator(_price)]


class _PricesSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    input_per_million: _Price
    output_per_million: _Price


class _ProfileSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)

    provider: Literal["openai", "anthropic"]
    base_url: str
    model: _Name
    api_key_env: str | None = None
    temperature: Annotated[float | None, Field(ge=0, le=2)] = None
    max_tokens: Annotated[int | None, Field(gt=0)] = None
    timeout_s: Annotated[float, Field(gt=0)] = DEFAULT_TIMEOUT_S
    prices: _PricesSpec | None = None

    @field_validator("base_url")
    @classmethod
    def _check_base_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http:// or https:// URL with a host")
        if parts.username is not None or parts.password is not None:
            raise ValueError("must not embed credentials; name the key's variable in api_key_env")
        if parts.query or parts.fragment:
            raise ValueError("must not have a query or fragment")
        return value.rstrip("/")

    @field_validator("api_key_env")
    @classmethod
    def _check_api_key_env(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.fullmatch(value):
            raise ValueError("must be an environment variable name, e.g. MY_PROVIDER_KEY")
        return value


class _ReplaySpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    provider: Literal["replay"]
    cassette: _Name | None = None
    run_id: _Name | None = None
    timeout_s: Annotated[float, Field(gt=0)] = DEFAULT_TIMEOUT_S


class _ProfilesFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    profiles: Annotated[dict[_Name, _ProfileSpec], Field(min_length=1)]


def load_profiles(path: Path) -> Profiles:
    """Load and validate a profiles file; ProfilesError lists every problem."""
    file = str(path)
    try:
        data = load_yaml_file(path, max_bytes=MAX_PROFILES_FILE_BYTES)
    except YAMLLoadError as exc:
        raise ProfilesError([ContractProblem(file, "", str(exc))]) from None
    return parse_profiles(data, file)


def parse_profiles(data: Any, file: str) -> Profiles:
    """Validate already-parsed profiles data; `file` names the source in problems."""
    if data is None:
        raise ProfilesError([ContractProblem(file, "", "the file is empty; expected `profiles:`")])
    original = data
    replays, data = _replay_specs(data)
    problems: list[ContractProblem] = []
    profiles: dict[str, ModelProfile] = {}
    try:
        parsed = _ProfilesFile.model_validate(data)
    except ValidationError as exc:
        problems = [ContractProblem(file, _key_path(e["loc"]), _message(e)) for e in exc.errors()]
        if replays and all(p.path == "profiles" for p in problems):
            problems = []  # "must define at least one profile": the replays are some
        parsed = None
    for name, raw in replays.items():
        replay = _replay_profile(name, raw, file, problems)
        if replay is not None:
            profiles[name] = replay
    for name, spec in parsed.profiles.items() if parsed is not None else ():
        limit = _MAX_TEMPERATURE[spec.provider]
        if spec.temperature is not None and spec.temperature > limit:
            path = f"profiles.{name}.temperature"
            message = f"must be at most {limit:g} for provider {spec.provider}"
            problems.append(ContractProblem(file, path, message))
        prices = spec.prices
        profiles[name] = ModelProfile(
            name=name,
            **spec.model_dump(exclude={"prices"}),
            prices=None
            if prices is None
            else Prices.per_million(prices.input_per_million, prices.output_per_million),
        )
    if problems:
        raise ProfilesError(problems)
    if replays:  # in the file's order
        profiles = {name: profiles[name] for name in original["profiles"] if name in profiles}
    return Profiles(profiles, source=file)


def _replay_specs(data: Any) -> tuple[dict[str, Any], Any]:
    """The `provider: replay` profiles apart, and the data without them."""
    if not isinstance(data, dict) or not isinstance(data.get("profiles"), dict):
        return {}, data
    replays = {
        name: spec
        for name, spec in data["profiles"].items()
        if isinstance(spec, dict) and spec.get("provider") == REPLAY
    }
    if not replays:
        return {}, data
    rest = {name: spec for name, spec in data["profiles"].items() if name not in replays}
    return replays, {**data, "profiles": rest}


def _replay_profile(
    name: Any, raw: Any, file: str, problems: list[ContractProblem]
) -> ModelProfile | None:
    where = f"profiles.{name}"
    if not isinstance(name, str) or not name:
        problems.append(ContractProblem(file, where, "profile name must be a non-empty string"))
        return None
    try:
        spec = _ReplaySpec.model_validate(raw)
    except ValidationError as exc:
        for e in exc.errors():
            path = ".".join([where, *(str(part) for part in e["loc"])])
            problems.append(ContractProblem(file, path, _message(e)))
        return None
    if (spec.cassette is None) == (spec.run_id is None):
        problems.append(
            ContractProblem(
                file,
                where,
                "a replay profile names exactly one of "
                "cassette (a file) or run_id (a recorded run)",
            )
        )
        return None
    cassette = None
    if spec.cassette is not None:
        cassette = Path(spec.cassette)
        if not cassette.is_absolute() and file:
            cassette = Path(file).parent / cassette
    return ModelProfile(
        name=name,
        provider="replay",
        base_url="",
        model=REPLAY,
        timeout_s=spec.timeout_s,
        cassette=cassette,
        replay_run=spec.run_id,
    )


def _key_path(loc: tuple[int | str, ...]) -> str:
    if loc and loc[-1] == "[key]":
        loc = loc[:-2]
    return ".".join(f"[{part}]" if isinstance(part, int) else part for part in loc)


def _message(error: ErrorDetails) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "required key is missing"
    if kind == "literal_error":
        return f"must be one of {', '.join(PROVIDERS)}, not {_shown(error['input'])}"
    if kind in ("model_type", "dict_type"):
        return "must be a mapping"
    if kind == "value_error":
        return error["msg"].removeprefix("Value error, ")
    if error["loc"] and error["loc"][-1] == "[key]":
        return f"profile name {_shown(error['input'])} must be a non-empty string"
    if kind == "too_short" and error["loc"] == ("profiles",):
        return "must define at least one profile"
    return error["msg"].replace("Input should", "must").replace("String should", "must")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
