"""The whole-attempt bound of a model request (`app.llm.bounds`): one loop timer for
many attempts, `TimeoutError` when it expires, and nothing else changed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from app.llm.bounds import AttemptBounds
from app.llm.client import LLMClient
from app.llm.errors import LLMMalformedResponse, LLMTransportError
from app.llm.messages import Message, ModelReply, Usage
from tests.llm.fakes import RecordingSleep, openai_profile
from tests.support.fake_llm import FakeLLM, openai_body

HELLO = [Message.user("hello")]
BODY = httpx.Response(200, json=openai_body({"role": "assistant", "content": "hi"})).content


class _Stream(httpx.AsyncByteStream):
    """A body that arrives in pieces (not read by the transport), then maybe never ends."""

    def __init__(self, *chunks: bytes, hang: bool = False) -> None:
        self.chunks = chunks
        self.hang = hang

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            await asyncio.sleep(0)
            yield chunk
        if self.hang:
            await asyncio.Event().wait()


async def _never_answers(request: httpx.Request) -> httpx.Response:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


async def test_an_attempt_that_times_out_is_retried_and_the_retry_answers(
    http: httpx.AsyncClient, model: FakeLLM, sleep: RecordingSleep
) -> None:
    client = LLMClient(http, max_attempts=2, sleep=sleep)
    model.script(_never_answers)
    model.reply(json=openai_body({"role": "assistant", "content": "late"}))

    reply = await client.complete(openai_profile(api_key_env=None, timeout_s=0.01), HELLO)

    assert reply.text == "late"
    assert len(model.requests) == 2
    assert sleep.delays == [1.0]


async def test_a_body_that_stops_arriving_times_out(
    http: httpx.AsyncClient, model: FakeLLM, sleep: RecordingSleep
) -> None:
    client = LLMClient(http, max_attempts=1, sleep=sleep)
    model.reply(stream=_Stream(BODY[:10], hang=True))

    with pytest.raises(LLMTransportError, match=r"no complete answer within 0\.01s"):
        await client.complete(openai_profile(api_key_env=None, timeout_s=0.01), HELLO)


async def test_a_streamed_body_is_read_whole_and_capped(
    http: httpx.AsyncClient, model: FakeLLM
) -> None:
    model.reply(stream=_Stream(BODY[:7], BODY[7:20], BODY[20:]))
    model.reply(stream=_Stream(BODY[:7], BODY[7:]))

    reply = await LLMClient(http).complete(openai_profile(api_key_env=None), HELLO)
    assert reply == ModelReply("hi", (), Usage(11, 7), "stop")

    with pytest.raises(LLMMalformedResponse, match="larger than 8 bytes"):
        await LLMClient(http, max_response_bytes=8).complete(
            openai_profile(api_key_env=None), HELLO
        )


async def test_a_cancellation_from_outside_is_not_a_timeout(
    http: httpx.AsyncClient, model: FakeLLM
) -> None:
    client = LLMClient(http, max_attempts=1)
    asked = asyncio.Event()

    async def never_answers(request: httpx.Request) -> httpx.Response:
        asked.set()
        return await _never_answers(request)

    model.script(never_answers)
    task = asyncio.create_task(client.complete(openai_profile(api_key_env=None), HELLO))
    await asked.wait()

    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task


async def test_bounds_expire_in_deadline_order_and_only_their_own_task() -> None:
    bounds = AttemptBounds(asyncio.get_running_loop())
    finished: list[str] = []

    async def attempt(name: str, seconds: float, work: asyncio.Event) -> None:
        try:
            with bounds.within(seconds):
                await work.wait()
            finished.append(name)
        except TimeoutError:
            finished.append(f"{name} timed out")

    slow_work, quick_work = asyncio.Event(), asyncio.Event()
    long = asyncio.create_task(attempt("long", 60.0, slow_work))
    short = asyncio.create_task(attempt("short", 0.01, quick_work))
    await short
    slow_work.set()
    await long

    assert finished == ["short timed out", "long"]


async def test_many_attempts_share_one_timer_and_leave_no_entries() -> None:
    loop = asyncio.get_running_loop()
    bounds = AttemptBounds(loop)
    scheduled: list[float] = []
    call_at = loop.call_at

    def counting_call_at(when: float, *args: object) -> asyncio.TimerHandle:
        scheduled.append(when)
        return call_at(when, *args)  # type: ignore[arg-type]

    loop.call_at = counting_call_at  # type: ignore[method-assign]
    try:
        for _ in range(500):
            with bounds.within(60.0):
                await asyncio.sleep(0)
    finally:
        del loop.call_at

    assert len(scheduled) == 1  # later deadlines never move the timer earlier
    assert bounds.pending == 0


def test_a_bound_needs_a_task() -> None:
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(RuntimeError, match="inside a task"):
            AttemptBounds(loop).within(1.0)
    finally:
        loop.close()


def test_one_client_serves_one_event_loop_after_another() -> None:
    model = FakeLLM()
    for _ in range(2):
        model.reply(json=openai_body({"role": "assistant", "content": "hi"}))
    http = httpx.AsyncClient(transport=httpx.MockTransport(model))
    client = LLMClient(http)

    async def ask() -> str:
        return (await client.complete(openai_profile(api_key_env=None), HELLO)).text

    assert asyncio.run(ask()) == "hi"
    assert asyncio.run(ask()) == "hi"
