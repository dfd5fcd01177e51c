"""The in-process peers, each running the same no-op tool its own way.

A peer's per-call cost is its marginal cost: a run carrying K tool calls minus
a run carrying none, divided by K, both in the same round. That leaves out
the agent's or graph's fixed cost per run, which is the peer's most
favourable reading.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from typing import Any

from bench.stats import cpu_clock

# What the peers below import, loaded before the bench sets the collector as a
# server does (`gc.freeze` keeps full collections off everything loaded by then):
# the peers' modules are treated as ours are.
PEER_MODULES = (
    "pydantic_ai",
    "pydantic_ai.messages",
    "pydantic_ai.models.function",
    "pydantic_ai.usage",
    "langchain_core.messages",
    "langchain_core.tools",
    "langgraph.graph",
    "langgraph.prebuilt",
)


def import_peers() -> None:
    """Import what the peers use; a peer that is not installed is skipped later anyway."""
    for name in PEER_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            continue


PeerRun = Callable[[], Awaitable[Any]]


async def _noop(text: str) -> dict[str, Any]:
    """Return the text unchanged."""
    return {"text": text}


def pydantic_ai_runs(calls: int) -> tuple[PeerRun, PeerRun]:
    """Agent runs whose function model asks for `calls` tool calls, then for none."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def agent(count: int) -> Any:
        def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            if len(messages) == 1:
                return ModelResponse(
                    parts=[
                        ToolCallPart("noop", {"text": "hello"}, tool_call_id=f"c{index}")
                        for index in range(count)
                    ]
                    or [TextPart("done")]
                )
            return ModelResponse(parts=[TextPart("done")])

        return Agent(FunctionModel(model), tools=[_noop], name=f"bench-{count}")

    with_calls, without = agent(calls), agent(0)
    return (lambda: with_calls.run("go")), (lambda: without.run("go"))


class PeerModelClock:
    """CPU seconds spent in a peer's model round trip, and in its model function."""

    def __init__(self) -> None:
        self.round_trip = 0.0
        self.function = 0.0


def pydantic_ai_turns(
    turns: int, tools: tuple[str, ...], clock: PeerModelClock
) -> Callable[[], Awaitable[Any]]:
    """An agent run whose function model asks, turn by turn, for one call of the same
    no-op tools as the router's benchmark (in turn, new arguments each turn, as JSON
    text), then answers with text. The model function is a coroutine, as a provider's
    client is (a plain function would be sent to a worker thread), and reports its
    usage, as the router's scripted model does (Pydantic AI would otherwise estimate
    it from the whole history on every request). `clock` counts the CPU time inside
    `FunctionModel.request` (the model round trip) and inside the model function."""
    import json

    from pydantic_ai import Agent, Tool
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import RequestUsage, UsageLimits

    from bench.tools import noop

    asked = 0

    async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal asked
        started = cpu_clock()
        turn = asked
        asked += 1
        usage = RequestUsage(input_tokens=10, output_tokens=5)
        if turn < turns:
            arguments = json.dumps({"text": f"turn {turn}"})
            call = ToolCallPart(tools[turn % len(tools)], arguments, tool_call_id=f"call-{turn}")
            response = ModelResponse(parts=[call], usage=usage)
        else:
            response = ModelResponse(parts=[TextPart("done")], usage=usage)
        clock.function += cpu_clock() - started
        return response

    class TimedModel(FunctionModel):
        async def request(self, *args: Any, **kwargs: Any) -> ModelResponse:
            started = cpu_clock()
            try:
                return await super().request(*args, **kwargs)
            finally:
                clock.round_trip += cpu_clock() - started

    agent = Agent(
        TimedModel(model),
        tools=[Tool(noop, name=name, description="Return the text unchanged.") for name in tools],
        name=f"bench-turns-{turns}",
    )
    limits = UsageLimits(request_limit=turns + 2)

    async def run() -> Any:
        nonlocal asked
        asked = 0
        result = await agent.run("Echo texts.", usage_limits=limits)
        assert asked == turns + 1, (asked, turns)
        return result

    return run


def langgraph_runs(calls: int) -> tuple[PeerRun, PeerRun]:
    """A graph whose ToolNode executes `calls` tool calls of one AI message, then none."""
    from langchain_core.messages import AIMessage
    from langchain_core.tools import StructuredTool
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    noop = StructuredTool.from_function(coroutine=_noop, name="noop")
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode([noop]))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    app = graph.compile()

    def message(count: int) -> Any:
        return AIMessage(
            content="",
            tool_calls=[
                {"name": "noop", "args": {"text": "hello"}, "id": f"c{index}"}
                for index in range(count)
            ],
        )

    with_calls, without = message(calls), message(0)
    return (
        lambda: app.ainvoke({"messages": [with_calls]}),
        lambda: app.ainvoke({"messages": [without]}),
    )


def marginal_per_call(calls: int, runs: tuple[PeerRun, PeerRun]) -> Callable[[], Awaitable[float]]:
    """A measure: CPU µs per tool call beyond the run's fixed cost."""
    with_calls, without = runs

    async def measure() -> float:
        started = cpu_clock()
        await with_calls()
        loaded = cpu_clock() - started
        started = cpu_clock()
        await without()
        empty = cpu_clock() - started
        return max(loaded - empty, 0.0) / calls * 1e6

    return measure
