"""The completion gate: verifiers judge the run's accumulated receipts.

A verifier is an App-registered policy (`verifiers:` in a registry), called
with `{"receipts": [...], "text": ..., "final": ...}` and answering
`{"ok": bool, "reason": str}`, or a built-in named `builtin:<name>` whose
parameters come from the request. Built-ins are structural: they count
receipts by tool and status and know nothing of what a tool means.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from app.contract.compiled import PolicyCallable
from app.router.policies import PolicyFailed, call_policy, short

BUILTIN_PREFIX = "builtin:"


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    reason: str


class Verifier(Protocol):
    @property
    def name(self) -> str: ...

    async def judge(self, run: Mapping[str, Any], timeout_s: float) -> Verdict: ...


@dataclass(frozen=True, slots=True)
class Completion:
    verifier: Verifier
    max_attempts: int


@dataclass(frozen=True, slots=True)
class RegisteredVerifier:
    policy: PolicyCallable

    @property
    def name(self) -> str:
        return self.policy.name

    async def judge(self, run: Mapping[str, Any], timeout_s: float) -> Verdict:
        try:
            answer = await call_policy(self.policy, run, timeout_s)
        except PolicyFailed as exc:
            return Verdict(False, f"verifier {exc}")
        if isinstance(answer, Mapping):
            ok, reason = answer.get("ok"), answer.get("reason", "")
            if isinstance(ok, bool) and isinstance(reason, str):
                return Verdict(ok, short(reason) or ("verified" if ok else "not verified"))
        return Verdict(
            False,
            f"verifier {self.name!r} answered {type(answer).__name__}, "
            'not {"ok": bool, "reason": str}',
        )


@dataclass(frozen=True, slots=True)
class ToolsSucceeded:
    """Passes once every named tool has at least one succeeded receipt in the run."""

    tools: tuple[str, ...]

    @property
    def name(self) -> str:
        return BUILTIN_PREFIX + "tools_succeeded"

    async def judge(self, run: Mapping[str, Any], timeout_s: float) -> Verdict:
        done = {r["tool"] for r in run["receipts"] if r["status"] == "succeeded"}
        missing = [tool for tool in self.tools if tool not in done]
        if missing:
            return Verdict(False, "no successful call yet of " + ", ".join(missing))
        return Verdict(True, "every named tool succeeded at least once")


# (pointer below the completion's `params`, message)
ParamProblem = tuple[str, str]
BuiltinFactory = Callable[
    [Mapping[str, Any], Sequence[str]], tuple[Verifier | None, list[ParamProblem]]
]


def _tools_succeeded(
    params: Mapping[str, Any], allowed: Sequence[str]
) -> tuple[Verifier | None, list[ParamProblem]]:
    problems = [(f"/{key}", "unknown parameter") for key in params if key != "tools"]
    tools = params.get("tools")
    if not isinstance(tools, list) or not tools or not all(isinstance(t, str) for t in tools):
        problems.append(("/tools", "must be a non-empty list of tool ids"))
        return None, problems
    for index, tool in enumerate(tools):
        if tool not in allowed:
            problems.append((f"/tools/{index}", f"tool {tool!r} is not allowed in this run"))
        elif tools.index(tool) != index:
            problems.append((f"/tools/{index}", f"tool {tool!r} is listed twice"))
    if problems:
        return None, problems
    return ToolsSucceeded(tuple(tools)), []


BUILTINS: Mapping[str, BuiltinFactory] = {
    BUILTIN_PREFIX + "tools_succeeded": _tools_succeeded,
}
