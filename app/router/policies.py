"""Calling App-registered policy callables (guardrails and verifiers).

A policy gets one positional argument, a fresh copy of plain JSON data, so it
can neither see nor change what the engine will run. Sync policies run in a
worker thread; every call is bounded by a timeout. Policies run in the router
because they decide, they never act: the engine stays the only place tools run.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from app.contract.compiled import PolicyCallable
from app.foundation.redaction import redact_text

_MAX_REASON_CHARS = 500


class PolicyFailed(Exception):
    """The policy raised, timed out, or returned something outside its contract."""


async def call_policy(policy: PolicyCallable, argument: Any, timeout_s: float) -> Any:
    target = policy.target
    try:
        fresh = orjson.loads(orjson.dumps(argument, option=orjson.OPT_NON_STR_KEYS))
        async with asyncio.timeout(timeout_s):
            if target.is_async:
                return await target.function(fresh)
            return await asyncio.to_thread(target.function, fresh)
    except TimeoutError:
        raise PolicyFailed(f"{policy.name!r} gave no answer within {timeout_s:g}s") from None
    except Exception as exc:
        raise PolicyFailed(f"{policy.name!r} raised {shown_error(exc)}") from None


def shown_error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return short(text)


def short(text: str, limit: int = _MAX_REASON_CHARS) -> str:
    text = redact_text(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"
