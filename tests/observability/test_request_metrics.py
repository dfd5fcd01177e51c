"""HTTP request metrics noted per request and counted at the end of the loop turn."""

from __future__ import annotations

import asyncio
import sys
import threading

import httpx
import pytest

from app.observability.exposition import flush_buffered
from app.observability.metrics import HTTP_DURATION, REGISTRY
from app.observability.middleware import ObservabilityMiddleware
from app.observability.request_metrics import RequestMeter

IN_FLIGHT = "toolloop_http_requests_in_flight"
REQUESTS = "toolloop_http_requests_total"
ROUTE = "/test/request-metrics"


def _read(name: str, **labels: str) -> float:
    """The registry as it stands, nothing flushed first."""
    found = REGISTRY.get_sample_value(name, labels)
    return 0.0 if found is None else found


def _answered(route: str = ROUTE, status: str = "2xx") -> float:
    return _read(REQUESTS, method="GET", route=route, status_class=status)


def _durations(route: str = ROUTE) -> dict[str, float]:
    """The latency histogram's samples for the route, by sample name and bucket."""
    return {
        f"{sample.name}{sample.labels.get('le', '')}": sample.value
        for metric in REGISTRY.collect()
        if metric.name == "toolloop_http_request_duration_seconds"
        for sample in metric.samples
        if sample.labels.get("route") == route and not sample.name.endswith("_created")
    }


async def test_requests_are_counted_at_the_end_of_the_loop_turn() -> None:
    meter = RequestMeter()
    before, in_flight = _answered(), _read(IN_FLIGHT)

    for _ in range(3):
        meter.started()
    assert _read(IN_FLIGHT) == in_flight  # held back
    meter.answered("GET", ROUTE, "2xx", 0.004)
    meter.answered("GET", ROUTE, "2xx", 0.2)
    assert _answered() == before

    await asyncio.sleep(0)  # the turn ends

    assert _answered() == before + 2
    assert _read(IN_FLIGHT) == in_flight + 1  # three started, two answered
    meter.answered("GET", ROUTE, "2xx", 0.01)
    await asyncio.sleep(0)
    assert _read(IN_FLIGHT) == in_flight


async def test_a_scrape_sees_every_request_noted_before_it() -> None:
    meter = RequestMeter()
    before, in_flight = _answered(status="5xx"), _read(IN_FLIGHT)
    meter.started()
    meter.started()
    meter.answered("GET", ROUTE, "5xx", 0.03)

    flush_buffered()  # what `/metrics` does before it renders

    assert _answered(status="5xx") == before + 1
    assert _read(IN_FLIGHT) == in_flight + 1
    meter.answered("GET", ROUTE, "5xx", 0.03)
    flush_buffered()


async def test_latencies_land_in_the_buckets_observe_would_put_them_in() -> None:
    noted, observed = "/test/request-metrics/noted", "/test/request-metrics/observed"
    amounts = [0.0004, 0.001, 0.0049, 0.005, 0.3, 2.5, 40.0, 0.02, 0.02]
    meter = RequestMeter()
    before = {route: _durations(route) for route in (noted, observed)}

    for amount in amounts:
        meter.started()
        meter.answered("GET", noted, "2xx", amount)
        HTTP_DURATION.labels("GET", observed).observe(amount)
    meter.flush()

    added = {}
    for route in (noted, observed):
        after = _durations(route)
        added[route] = {key: after[key] - before[route].get(key, 0.0) for key in after}
    assert added[noted] == pytest.approx(added[observed])
    assert added[noted]["toolloop_http_request_duration_seconds_count"] == len(amounts)


def test_without_a_running_loop_each_request_counts_at_once() -> None:
    meter = RequestMeter()
    before, in_flight = _answered(), _read(IN_FLIGHT)

    meter.started()
    assert _read(IN_FLIGHT) == in_flight + 1
    meter.answered("GET", ROUTE, "2xx", 0.001)

    assert _answered() == before + 1
    assert _read(IN_FLIGHT) == in_flight


async def test_scrapes_from_another_thread_lose_nothing_and_never_count_below_zero() -> None:
    meter = RequestMeter()
    before, in_flight = _answered(), _read(IN_FLIGHT)
    lowest = in_flight
    stop = threading.Event()

    def scrape() -> None:
        nonlocal lowest
        while not stop.is_set():
            flush_buffered()
            lowest = min(lowest, _read(IN_FLIGHT))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    scraper = threading.Thread(target=scrape)
    scraper.start()
    try:
        for _ in range(300):
            for _ in range(20):
                meter.started()
                meter.answered("GET", ROUTE, "2xx", 0.001)
            await asyncio.sleep(0)
    finally:
        stop.set()
        scraper.join()
        sys.setswitchinterval(interval)
    flush_buffered()

    assert _answered() == before + 6000
    assert _read(IN_FLIGHT) == in_flight
    assert lowest >= in_flight  # an answer is never counted before its start


class _RequestDuringFlush(list[tuple[str, str, str, float]]):
    """The answers kept, where a flush's first look at them lets one more request
    start and be answered on the loop's thread first (a flush from a scrape's thread,
    interrupted there)."""

    def __init__(self, meter: RequestMeter) -> None:
        super().__init__()
        self.meter = meter
        self.interrupted = False

    def __len__(self) -> int:
        if not self.interrupted:
            self.interrupted = True
            self.meter._started += 1  # `started` on the loop, whose flush is already due
            self.append(("GET", ROUTE, "2xx", 0.001))
        return super().__len__()


def test_an_answer_is_never_counted_before_its_start() -> None:
    meter = RequestMeter()
    kept = _RequestDuringFlush(meter)
    meter._answered = kept
    before, in_flight = _answered(), _read(IN_FLIGHT)

    meter.flush()

    assert kept.interrupted
    assert _answered() == before + 1
    assert _read(IN_FLIGHT) == in_flight


async def test_the_middleware_counts_a_request_in_flight_until_it_is_answered() -> None:
    release = asyncio.Event()
    entered = asyncio.Event()

    async def slow(scope: object, receive: object, send: object) -> None:
        entered.set()
        await release.wait()
        await send({"type": "http.response.start", "status": 204, "headers": []})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": b""})  # type: ignore[operator]

    app = ObservabilityMiddleware(slow)
    in_flight = _read(IN_FLIGHT)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        request = asyncio.create_task(client.get("/anything"))
        await entered.wait()
        flush_buffered()
        assert _read(IN_FLIGHT) == in_flight + 1
        release.set()
        assert (await request).status_code == 204
    flush_buffered()
    assert _read(IN_FLIGHT) == in_flight
