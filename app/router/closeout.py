"""Closeout: the final writer's answer (checked against `final_schema`), the
completion gate, and the outcome in the caller's and the stored copy."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.foundation.redaction import DEFAULT_REDACTOR, redact_text
from app.llm.messages import Message
from app.router.final import parse_final
from app.router.model import ask
from app.router.observations import render, to_json_text
from app.router.outcome import Outcome, RunStatus, Stop
from app.router.policies import short
from app.router.session import RunSession
from app.router.verifiers import Verdict


@dataclass(frozen=True, slots=True)
class Answer:
    text: str
    final: Any


async def write_final(session: RunSession, turn_stop: Callable[[], str | None]) -> Answer | str:
    """The answer from the goal and the observations only; or the stop that ended it.

    `turn_stop()` names the bound that malformed replies may have reached.
    """
    prompts, request = session.kit.prompts, session.plan.request
    schema = session.plan.final_schema
    context = to_json_text(request.context, indent=True)
    messages = [
        Message.system(prompts.render("final.system", goal=request.goal, context=context)),
        Message.user(
            prompts.render(
                "final.task",
                goal=request.goal,
                context=context,
                observations=render(session.state.observations),
            )
        ),
    ]
    if schema is not None:
        shown = to_json_text(dict(schema.source), indent=True)
        messages.append(Message.user(prompts.render("final.schema", final_schema=shown)))
    attempts = session.kit.limits.final_attempts
    last_stop = Stop.FINAL_SCHEMA.value
    for attempt in range(1, attempts + 1):
        reply = await ask(session, session.plan.final_profile, messages, (), "final")
        if isinstance(reply, str):
            return reply
        if reply is None or not reply.text.strip():
            if reply is not None:
                session.state.count_malformed("empty_answer")
                session.record("router.malformed_reply", {"role": "final", "reason": "empty"})
            last_stop = Stop.MALFORMED_OUTPUT.value
            stop = turn_stop()
            if stop is not None:
                return stop
            continue
        if schema is None:
            return Answer(reply.text, None)
        value, problems = parse_final(reply.text, schema)
        session.record(
            "router.final_checked", {"attempt": attempt, "ok": not problems, "problems": problems}
        )
        if not problems:
            return Answer(reply.text, value)
        last_stop = Stop.FINAL_SCHEMA.value
        messages.append(Message.assistant(reply.text))
        messages.append(
            Message.user(
                prompts.render(
                    "final.retry",
                    problems="\n".join(f"- {p}" for p in problems),
                    attempt=str(attempt),
                    max_attempts=str(attempts),
                )
            )
        )
    return last_stop


async def judge(session: RunSession, answer: Answer) -> Verdict | None:
    """The completion gate's verdict on the accumulated receipts (None: no gate)."""
    completion = session.plan.completion
    if completion is None:
        return None
    run = {"receipts": session.records(), "text": answer.text, "final": answer.final}
    verdict = await completion.verifier.judge(run, session.kit.limits.policy_timeout_s)
    session.record(
        "router.completion_checked",
        {
            "attempt": session.state.attempts,
            "max_attempts": completion.max_attempts,
            "verifier": completion.verifier.name,
            "ok": verdict.ok,
            "reason": short(verdict.reason),
        },
    )
    return verdict


def outcome(
    session: RunSession,
    status: RunStatus,
    stopped_by: str,
    answer: Answer | None,
    pending: list[dict[str, Any]],
) -> Outcome:
    """The caller's copy: this stretch's receipts with their real outputs."""
    state = session.state
    return Outcome(
        run_id=session.identity.run_id,
        status=status,
        stopped_by=stopped_by,
        text="" if answer is None else answer.text,
        final=None if answer is None else answer.final,
        attempts=state.attempts,
        turns=state.turns,
        state=state.to_public(),
        receipts=session.caller_copies(),
        pending=pending,
    )


def stored(session: RunSession, caller_copy: Outcome) -> dict[str, Any]:
    """The outcome as stored: every receipt of the run, and everything redacted."""
    kept = caller_copy.to_dict()
    kept["receipts"] = session.records()
    kept["text"] = redact_text(caller_copy.text)
    kept["final"] = DEFAULT_REDACTOR.redact(caller_copy.final)
    return kept
