"""requires_confirmation: the run pauses; a decision resumes it from the checkpoint."""

from __future__ import annotations

from dataclasses import replace

from app.router.loop import Finished, Paused
from app.router.outcome import RunStatus
from app.router.pause import args_digest
from tests.router import router_tools
from tests.router.harness import RouterHarness, request
from tests.support.fake_llm import openai_calls, openai_text


async def pause(harness: RouterHarness) -> Paused:
    harness.model.script(
        openai_calls(
            ("c1", "publish", {"title": "Bearer abcdefghijklmnop"}),
            ("c2", "lookup", {"term": "toolloop"}),
        )
    )
    result = await harness.start(request(context={"token": "sk-abcdefghijklmnopqrstuvwxyz"}))
    assert isinstance(result, Paused)
    return result


async def test_a_call_needing_confirmation_pauses_the_run(harness: RouterHarness) -> None:
    paused = await pause(harness)

    outcome = paused.outcome
    assert (outcome.status, outcome.stopped_by) == (RunStatus.PENDING, "confirmation")
    (pending,) = outcome.pending
    assert pending["tool"] == "publish"
    assert pending["call_id"] == "c1"
    assert pending["args_digest"] == args_digest({"title": "Bearer abcdefghijklmnop"})
    assert "args" not in pending
    # The other call of the turn ran; publish did not.
    assert router_tools.CALLS == [("lookup", {"term": "toolloop"})]
    (call,) = paused.calls
    assert call.args == {"title": "Bearer abcdefghijklmnop"}
    # The checkpoint is redacted: no secret of the request or the conversation is in it.
    kept = str(paused.checkpoint.to_json())
    assert "abcdefghijklmnop" not in kept
    assert "sk-abcdefghijklmnopqrstuvwxyz" not in kept
    assert paused.checkpoint.pending == [pending]
    assert paused.stored["pending"] == [pending]


async def test_an_approval_runs_exactly_the_kept_arguments_and_continues(
    harness: RouterHarness,
) -> None:
    paused = await pause(harness)
    harness.model.script(openai_text("published"), openai_text("answer"))

    result = await harness.resume(paused, (0, True, "fine"))

    assert isinstance(result, Finished)
    assert result.outcome.status is RunStatus.DONE
    assert router_tools.CALLS[-1] == ("publish", {"title": "Bearer abcdefghijklmnop"})
    # The model saw the publish result under its call id; the conversation was restored.
    results = harness.model.tool_results(1)
    assert set(results) == {"c1", "c2"}
    assert '"published"' in results["c1"]
    stored = harness.stored(paused.outcome.run_id)
    assert [r["tool"] for r in stored] == ["lookup", "publish"]
    assert [r["seq"] for r in stored] == [0, 1]
    assert [r["tool"] for r in result.stored["receipts"]] == ["lookup", "publish"]
    assert result.outcome.state["calls"] == 2


async def test_a_rejection_is_fed_to_the_model_as_the_result(harness: RouterHarness) -> None:
    paused = await pause(harness)
    harness.model.script(openai_text("ok, not published"), openai_text("answer"))

    result = await harness.resume(paused, (0, False, "not today"))

    assert result.outcome.status is RunStatus.DONE
    assert [name for name, _ in router_tools.CALLS] == ["lookup"]
    assert harness.model.tool_results(1)["c1"] == "denied: confirmation rejected: not today"
    publish = next(r for r in result.stored["receipts"] if r["tool"] == "publish")
    assert publish["status"] == "denied"


async def test_arguments_that_do_not_match_their_digest_never_run(
    harness: RouterHarness,
) -> None:
    paused = await pause(harness)
    harness.model.script(openai_text("ok"), openai_text("answer"))
    tampered = replace(paused, calls=(replace(paused.calls[0], args={"title": "other"}),))

    await harness.resume(tampered, (0, True, ""))

    assert [name for name, _ in router_tools.CALLS] == ["lookup"]
    assert "do not match their digest" in harness.model.tool_results(1)["c1"]


async def test_the_deadline_goes_on_from_the_time_spent_before_the_pause(
    harness: RouterHarness,
) -> None:
    harness.model.script(
        openai_calls(("c1", "nap", {"seconds": 0.2}), ("c2", "publish", {"title": "t"}))
    )
    paused = await harness.start(request(budgets={"deadline_s": 30}))
    assert isinstance(paused, Paused)
    spent = paused.outcome.state["deadline"]["elapsed_s"]
    assert spent >= 0.2
    assert paused.checkpoint.state["deadline"] == {"deadline_s": 30, "elapsed_s": spent}
    harness.model.script(openai_text("published"), openai_text("answer"))

    result = await harness.resume(paused, (0, True, "fine"))

    # The resumed stretch counts on from the time spent, not from zero.
    assert result.outcome.state["deadline"]["elapsed_s"] >= spent
