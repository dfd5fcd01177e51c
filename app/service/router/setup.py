"""Building the router service from the settings at startup.

If the profiles or the prompts fail to load, the router stays closed: it
answers 503 and says why, one log line names every problem, and plans keep
working. Without profiles but with the prompts, replays still run (a replay asks
no model): `toolloop router replay` needs no profiles, and the line says so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import httpx
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.contract import Contract
from app.engine import Engine
from app.observability.router import ChatModel, MeteredLLMClient
from app.router.limits import RouterLimits
from app.router.ports import RouterKit
from app.router.setup import load_setup, model_client
from app.service.router.service import RouterService, as_is
from app.service.usage.ledger import StoredUsage
from app.settings import Settings
from app.store.journal.writer import GroupCommitWriter

logger = logging.getLogger("toolloop.router")


def router_limits(settings: Settings) -> RouterLimits:
    return RouterLimits(
        max_turns=settings.router_max_turns,
        deadline_s=settings.router_deadline_s,
        max_tokens=settings.router_max_tokens,
        max_completion_attempts=settings.router_max_completion_attempts,
        max_steps=settings.router_max_steps,
        max_goal_chars=settings.router_max_goal_chars,
        max_observation_chars=settings.router_max_observation_chars,
        max_malformed_outputs=settings.router_max_malformed_outputs,
        max_duplicate_calls=settings.router_max_duplicate_calls,
        max_budget_breaches=settings.router_max_budget_breaches,
        max_same_tool_streak=settings.router_max_same_tool_streak,
        final_attempts=settings.router_final_attempts,
        max_parallel_calls=settings.router_max_parallel_calls,
        policy_timeout_s=settings.router_policy_timeout_s,
    )


def open_router(
    settings: Settings,
    contract: Contract,
    engine: Engine,
    sessions: async_sessionmaker[AsyncSession],
    writer: GroupCommitWriter,
    instance_id: str,
    http: httpx.AsyncClient,
    *,
    wrap_model: Callable[[ChatModel], ChatModel] = as_is,
) -> RouterService:
    """`wrap_model`: what every model request goes through (a trace's span)."""
    setup = load_setup(settings.profiles, settings.prompts_dir)
    limits = router_limits(settings)
    kit = None
    replay_kit = None
    if setup.prompts is not None:
        llm = model_client(
            http,
            max_attempts=settings.llm_max_attempts,
            backoff_s=settings.llm_backoff_s,
            backoff_max_s=settings.llm_backoff_max_s,
            retry_after_max_s=settings.llm_retry_after_max_s,
        )
        replay_kit = RouterKit.build(
            engine, wrap_model(MeteredLLMClient(llm)), setup.prompts, limits, StoredUsage(sessions)
        )
    if setup.ready:
        assert setup.profiles is not None
        assert setup.prompts is not None
        kit = replay_kit
        logger.info(
            "router ready: %d model profile(s) from %s, prompts from %s",
            len(setup.profiles),
            setup.profiles.source,
            setup.prompts.source,
        )
    elif replay_kit is not None:
        logger.error(
            "router runs need model profiles, POST /router/runs answers 503 "
            "(plans and `toolloop router replay` are not affected): %s",
            "; ".join(setup.problems),
        )
    else:
        logger.error(
            "router disabled, POST /router/runs answers 503 (plans are not affected): %s",
            "; ".join(setup.problems),
        )
    return RouterService(
        contract,
        sessions,
        writer,
        instance_id,
        limits,
        setup,
        kit,
        replay_kit=replay_kit,
        wrap_model=wrap_model,
    )
