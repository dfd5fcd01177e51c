"""Admission of a router request: every problem, each with a JSON pointer, before anything runs.

Budgets and the allowlist may only narrow what the owner's runner defaults
and the server limits allow. Profiles, guardrails and verifiers must be
defined; nothing is implied or defaulted to a model, a tool or a policy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from app.contract.compiled import Contract, Owner, PolicyCallable, Tool
from app.contract.errors import SchemaDefinitionError
from app.contract.schemas import CompiledSchema, compile_schema
from app.engine.preflight import PlanProblem
from app.llm.errors import UnknownProfileError
from app.llm.profiles import ModelProfile, Profiles
from app.router.limits import RouterLimits
from app.router.request import Budgets, RouterRequest, Step
from app.router.verifiers import BUILTINS, Completion, RegisteredVerifier, Verifier


@dataclass(frozen=True, slots=True)
class ResolvedBudgets:
    max_calls: int
    max_turns: int
    deadline_s: float
    max_tokens: int | None
    max_cost_nanos: int | None = None


@dataclass(frozen=True, slots=True)
class RunPlan:
    """An admitted request, resolved against the contract and the profiles.

    `request` has its budgets filled in, so a checkpoint resumes with the
    same limits whatever the server settings are by then.
    """

    request: RouterRequest
    owner: Owner
    router_profile: ModelProfile
    final_profile: ModelProfile
    final_schema: CompiledSchema | None
    budgets: ResolvedBudgets
    tools: Mapping[str, Tool]
    guardrails: tuple[PolicyCallable, ...]
    completion: Completion | None
    # The steps' arguments passed their tools' input schemas here (not when resuming).
    steps_checked: bool = True


def admit(
    request: RouterRequest,
    contract: Contract,
    profiles: Profiles,
    limits: RouterLimits,
    *,
    resuming: bool = False,
) -> tuple[list[PlanProblem], RunPlan | None]:
    """Check the request; the plan is None unless there are no problems.

    `resuming` skips the steps (they ran before the checkpoint).
    """
    check = _Check(contract, limits)
    owner = check.owner(request.owner)
    check.goal(request.goal)
    router_profile = check.profile("/router_profile", request.router_profile, profiles)
    final_profile = check.profile("/final_profile", request.final_profile, profiles)
    tools = check.allowlist(owner, request.allowed_tools)
    budgets = check.budgets(owner, request.budgets)
    check.priced(request.budgets, router_profile, final_profile)
    if not resuming:
        check.steps(request.steps, tools, budgets)
    guardrails = check.guardrails(request.guardrails)
    completion = check.completion(request, tools)
    final_schema = check.final_schema(request.final_schema)
    if check.problems:
        return check.problems, None
    assert owner is not None
    assert router_profile is not None
    assert final_profile is not None
    assert budgets is not None
    filled = Budgets(
        max_calls=budgets.max_calls,
        max_turns=budgets.max_turns,
        deadline_s=budgets.deadline_s,
        max_tokens=budgets.max_tokens,
        max_cost_nanos=budgets.max_cost_nanos,
    )
    return [], RunPlan(
        request=replace(request, budgets=filled, allowed_tools=tuple(tools)),
        owner=owner,
        router_profile=router_profile,
        final_profile=final_profile,
        final_schema=final_schema,
        budgets=budgets,
        tools=tools,
        guardrails=guardrails,
        completion=completion,
        steps_checked=not resuming,
    )


class _Check:
    def __init__(self, contract: Contract, limits: RouterLimits) -> None:
        self.contract = contract
        self.limits = limits
        self.problems: list[PlanProblem] = []

    def add(self, pointer: str, message: str) -> None:
        self.problems.append(PlanProblem(pointer, message))

    def owner(self, name: str) -> Owner | None:
        owner = self.contract.owners.get(name)
        if owner is None:
            self.add("/owner", f"unknown owner {name!r}")
        return owner

    def goal(self, goal: str) -> None:
        if not goal.strip():
            self.add("/goal", "the goal must not be empty")
        elif len(goal) > self.limits.max_goal_chars:
            self.add("/goal", f"the goal exceeds {self.limits.max_goal_chars} characters")

    def profile(self, pointer: str, name: str, profiles: Profiles) -> ModelProfile | None:
        try:
            return profiles.require(name)
        except UnknownProfileError as exc:
            self.add(pointer, str(exc))
            return None

    def allowlist(self, owner: Owner | None, requested: tuple[str, ...] | None) -> dict[str, Tool]:
        if owner is None:
            return {}
        allowed = owner.runner_defaults.allowed_tools
        if requested is None:
            return {tool_id: owner.tools[tool_id] for tool_id in allowed}
        tools: dict[str, Tool] = {}
        for index, tool_id in enumerate(requested):
            pointer = f"/allowed_tools/{index}"
            if tool_id in tools:
                self.add(pointer, f"tool {tool_id!r} is listed twice")
            elif tool_id not in allowed:
                self.add(
                    pointer,
                    f"tool {tool_id!r} is not in the allowed_tools of {owner.name!r}; "
                    "allowed_tools may only narrow the owner's allowlist",
                )
            else:
                tools[tool_id] = owner.tools[tool_id]
        if not requested:
            self.add("/allowed_tools", "at least one tool is required")
        return tools

    def budgets(self, owner: Owner | None, budgets: Budgets) -> ResolvedBudgets | None:
        limits = self.limits
        owner_calls = None if owner is None else owner.runner_defaults.max_calls
        max_calls = self._narrow(
            "/budgets/max_calls", budgets.max_calls, owner_calls, "the owner's max_calls"
        )
        max_turns = self._narrow(
            "/budgets/max_turns", budgets.max_turns, limits.max_turns, "the server's limit"
        )
        max_tokens = self._narrow(
            "/budgets/max_tokens", budgets.max_tokens, limits.max_tokens, "the server's limit"
        )
        deadline_s = budgets.deadline_s
        if deadline_s is None:
            deadline_s = limits.deadline_s
        elif not (math.isfinite(deadline_s) and deadline_s > 0):
            self.add("/budgets/deadline_s", "deadline_s must be a positive number of seconds")
        elif deadline_s > limits.deadline_s:
            self.add(
                "/budgets/deadline_s",
                f"{deadline_s:g}s exceeds the server's limit of {limits.deadline_s:g}s; "
                "budgets may only narrow",
            )
        if max_calls is None or max_turns is None:
            return None
        return ResolvedBudgets(max_calls, max_turns, deadline_s, max_tokens, budgets.max_cost_nanos)

    def priced(self, budgets: Budgets, *profiles: ModelProfile | None) -> None:
        if budgets.max_cost_nanos is None:
            return
        if budgets.max_cost_nanos <= 0:
            self.add("/budgets/max_cost", "must be more than zero")
        unpriced = {p.name for p in profiles if p is not None and p.prices is None}
        for name in sorted(unpriced):
            self.add(
                "/budgets/max_cost",
                f"profile {name!r} declares no prices; a cost budget needs "
                "prices on the router and final profiles",
            )

    def _narrow(
        self, pointer: str, value: int | None, ceiling: int | None, what: str
    ) -> int | None:
        if value is None:
            return ceiling
        if isinstance(value, bool) or value < 1:
            self.add(pointer, "must be a positive integer")
        elif ceiling is not None and value > ceiling:
            self.add(pointer, f"{value} exceeds {what} ({ceiling}); budgets may only narrow")
        return value

    def steps(
        self, steps: tuple[Step, ...], tools: Mapping[str, Tool], budgets: ResolvedBudgets | None
    ) -> None:
        limit = self.limits.max_steps
        if budgets is not None:
            limit = min(limit, budgets.max_calls)
        if len(steps) > limit:
            self.add("/steps", f"{len(steps)} steps exceed the limit of {limit} (max_calls)")
        first: dict[str, int] = {}
        for index, step in enumerate(steps):
            pointer = f"/steps/{index}"
            seen = first.setdefault(step.call_key, index)
            if seen != index:
                self.add(
                    f"{pointer}/call_key",
                    f"duplicate call_key {step.call_key!r}: at indices {seen} and {index}",
                )
            tool = tools.get(step.tool)
            if tool is None:
                self.add(f"{pointer}/tool", f"tool {step.tool!r} is not allowed in this run")
                continue
            if tool.requires_confirmation:
                self.add(
                    f"{pointer}/tool",
                    f"tool {step.tool!r} requires confirmation; it cannot be a deterministic step",
                )
            self._arguments(f"{pointer}/args", tool, step.args)

    def _arguments(self, pointer: str, tool: Tool, args: Mapping[str, Any]) -> None:
        schema = tool.input_schema
        if schema.is_valid(args):
            return
        found = schema.problems(args)
        if not found:
            self.add(pointer, f"arguments do not match the input schema of {tool.id!r}")
        for problem in found:
            self.add(pointer + problem.pointer, problem.message)

    def guardrails(self, names: tuple[str, ...]) -> tuple[PolicyCallable, ...]:
        found: list[PolicyCallable] = []
        for index, name in enumerate(names):
            guardrail = self.contract.guardrails.get(name)
            if guardrail is None:
                self.add(f"/guardrails/{index}", f"unknown guardrail {name!r}")
            elif guardrail in found:
                self.add(f"/guardrails/{index}", f"guardrail {name!r} is listed twice")
            else:
                found.append(guardrail)
        return tuple(found)

    def completion(self, request: RouterRequest, tools: Mapping[str, Tool]) -> Completion | None:
        spec = request.completion
        if spec is None:
            return None
        cap = self.limits.max_completion_attempts
        if isinstance(spec.max_attempts, bool) or not 1 <= spec.max_attempts <= cap:
            self.add("/completion/max_attempts", f"max_attempts must be between 1 and {cap}")
        verifier: Verifier | None = None
        factory = BUILTINS.get(spec.verify)
        if factory is not None:
            verifier, problems = factory(spec.params, list(tools))
            for pointer, message in problems:
                self.add("/completion/params" + pointer, message)
        else:
            registered = self.contract.verifiers.get(spec.verify)
            if registered is None:
                known = sorted([*self.contract.verifiers, *BUILTINS])
                self.add(
                    "/completion/verify",
                    f"unknown verifier {spec.verify!r} (defined: {', '.join(known) or 'none'})",
                )
            else:
                verifier = RegisteredVerifier(registered)
                if spec.params:
                    self.add(
                        "/completion/params",
                        "registered verifiers take no parameters; only built-ins do",
                    )
        if verifier is None:
            return None
        return Completion(verifier, spec.max_attempts)

    def final_schema(self, schema: Mapping[str, Any] | None) -> CompiledSchema | None:
        if schema is None:
            return None
        try:
            return compile_schema(dict(schema))
        except SchemaDefinitionError as exc:
            for message in exc.messages:
                self.add("/final_schema", message)
            return None
