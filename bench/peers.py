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
