"""An SSE stream of `GET /runs/{id}/events`, read in a thread while the test goes on."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import orjson


class Stream:
    """An events stream read in a thread: its events as (kind, data), until it closes."""

    def __init__(self, url: str) -> None:
        self.events: list[tuple[str, Any]] = []
        self.opened = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._read, args=(url,), daemon=True)
        self._thread.start()

    def _read(self, url: str) -> None:
        try:
            with httpx.stream("GET", url, timeout=httpx.Timeout(60, read=60)) as response:
                assert response.status_code == 200, response.read()
                self.opened.set()
                kind = ""
                for line in response.iter_lines():
                    if line.startswith("event: "):
                        kind = line.removeprefix("event: ")
                    elif line.startswith("data: "):
                        self.events.append((kind, orjson.loads(line.removeprefix("data: "))))
        except BaseException as exc:  # the test reports it
            self.error = exc
            self.opened.set()

    def join(self) -> list[tuple[str, Any]]:
        self._thread.join(timeout=60)
        assert not self._thread.is_alive(), "the stream did not end"
        assert self.error is None, self.error
        return self.events

    def receipt_keys(self) -> list[str]:
        return [data["call_key"] for kind, data in self.events if kind == "receipt"]
