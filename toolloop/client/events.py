"""Server-sent events, parsed line by line (the subset ToolLoop sends: `event`, `data`,
comments as heartbeats)."""

from __future__ import annotations

import json

from toolloop.client.models import RunEvent


class EventParser:
    """Feed it lines; it answers a `RunEvent` at each blank line that ends an event."""

    def __init__(self) -> None:
        self._kind = "message"
        self._data: list[str] = []

    def feed(self, line: str) -> RunEvent | None:
        if line.startswith(":"):
            return None
        if line:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                self._kind = value
            elif name == "data":
                self._data.append(value)
            return None
        if not self._data:
            self._kind = "message"
            return None
        event = RunEvent(self._kind, json.loads("\n".join(self._data)))
        self._kind, self._data = "message", []
        return event
