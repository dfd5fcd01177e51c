"""HTTP request metrics kept per loop turn and counted together.

Counting a request updates three prometheus_client values, each behind its own
lock (the in-flight gauge twice, the request counter, the latency histogram),
on the event loop, the thread every request waits for. As `MeteredSinks` does
for calls, the middleware only notes its requests here; `flush` counts them at
the end of the loop turn that noted them and before `/metrics` renders,
updating each touched series once. A
scrape sees every request this process answered so far, and those in flight;
other workers' (multiprocess mode) at most one loop turn old.
"""

from __future__ import annotations

import threading

from app.observability.exposition import flush_at_turn_end, flush_before_rendering
from app.observability.histograms import observe_all
from app.observability.labels import Children
from app.observability.metrics import HTTP_DURATION, HTTP_IN_FLIGHT, HTTP_REQUESTS

_HTTP_REQUESTS = Children(HTTP_REQUESTS)
_HTTP_DURATION = Children(HTTP_DURATION)

# (method label, route template, status class, seconds)
Answered = tuple[str, str, str, float]


class RequestMeter:
    def __init__(self) -> None:
        self._started = 0  # requests started; written on the event loop only
        self._started_counted = 0  # of those, how many a flush has counted
        self._answered: list[Answered] = []
        self._flush_scheduled = False
        self._flushing = threading.Lock()
        flush_before_rendering(self)

    def started(self) -> None:
        self._started += 1
        if not self._flush_scheduled:
            self._schedule_flush()

    def answered(self, method: str, route: str, status_class: str, seconds: float) -> None:
        """A request started with `started` was answered (or failed)."""
        self._answered.append((method, route, status_class, seconds))
        if not self._flush_scheduled:
            self._schedule_flush()

    def flush(self) -> None:
        """Count the requests noted so far into the metrics. Safe from any thread."""
        with self._flushing:
            self._flush_scheduled = False
            # The answers are taken before the starts are read: every answer taken
            # has its start counted, and the in-flight gauge never dips below zero.
            count = len(self._answered)
            answered = self._answered[:count]
            del self._answered[:count]
            started = self._started
            new, self._started_counted = started - self._started_counted, started
            if new != count:
                HTTP_IN_FLIGHT.inc(new - count)
            requests: dict[tuple[str, str, str], int] = {}
            durations: dict[tuple[str, str], list[float]] = {}
            for method, route, status_class, seconds in answered:
                key = (method, route, status_class)
                requests[key] = requests.get(key, 0) + 1
                found = durations.get((method, route))
                if found is None:
                    durations[method, route] = [seconds]
                else:
                    found.append(seconds)
            for labels, number in requests.items():
                _HTTP_REQUESTS(*labels).inc(number)
            for (method, route), amounts in durations.items():
                observe_all(_HTTP_DURATION(method, route), amounts)

    def _schedule_flush(self) -> None:
        self._flush_scheduled = flush_at_turn_end(self.flush)
