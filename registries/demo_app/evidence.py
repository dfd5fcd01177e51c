"""Evidence hook: keeps the last receipts in memory (a real App would ship them somewhere)."""

from __future__ import annotations

from collections import deque
from typing import Any

RECORDED: deque[dict[str, Any]] = deque(maxlen=1000)


def record(receipt: dict[str, Any]) -> None:
    RECORDED.append(receipt)
