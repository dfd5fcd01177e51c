"""A run's lane timeline, drawn on the server as SVG: one row per lane (a sequential
plan is one row), one bar per call from its start to its end, coloured by status."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from html import escape
from typing import Any

from markupsafe import Markup

WIDTH = 720
LABEL = 120
ROW = 22
BAR = 14
MIN_BAR = 2.0


def _moment(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


def lane_timeline(receipts: Sequence[Mapping[str, Any]]) -> Markup:
    """The SVG for `receipts` (stored views, in input order); empty when none ran."""
    timed = [
        (r, start, _moment(r.get("finished_at")) or start)
        for r in receipts
        if (start := _moment(r.get("started_at"))) is not None
    ]
    if not timed:
        return Markup("")
    origin = min(start for _, start, _ in timed)
    span = max((end - origin).total_seconds() for _, _, end in timed) or 1e-3
    lanes: dict[str, int] = {}
    for receipt, _, _ in timed:
        lanes.setdefault(receipt.get("item_key") or "", len(lanes))
    scale = (WIDTH - LABEL - 8) / span
    height = ROW * len(lanes) + 24
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" role="img" '
        f'viewBox="0 0 {WIDTH} {height}" width="100%" '
        f'aria-label="Lane timeline: {len(timed)} calls in {len(lanes)} lanes over '
        f'{span * 1000:.1f} ms">'
    ]
    for lane, row in lanes.items():
        y = row * ROW
        label = escape(lane[:18] or "sequence")
        parts.append(f'<text class="lane" x="0" y="{y + BAR}">{label}</text>')
    for receipt, start, end in timed:
        y = lanes[receipt.get("item_key") or ""] * ROW + 3
        x = LABEL + (start - origin).total_seconds() * scale
        width = max((end - start).total_seconds() * scale, MIN_BAR)
        status = escape(str(receipt.get("status")))
        tip = escape(
            f"{receipt.get('call_key')} · {receipt.get('tool')} · {receipt.get('status')}"
            f" · {receipt.get('duration_ms') or 0:.1f} ms"
        )
        parts.append(
            f'<rect class="bar status-{status}" x="{x:.1f}" y="{y}" width="{width:.1f}" '
            f'height="{BAR}" rx="2"><title>{tip}</title></rect>'
        )
    axis_y = ROW * len(lanes) + 16
    parts.append(f'<text class="axis" x="{LABEL}" y="{axis_y}">0 ms</text>')
    parts.append(
        f'<text class="axis" x="{WIDTH - 4}" y="{axis_y}" text-anchor="end">'
        f"{span * 1000:.1f} ms</text></svg>"
    )
    return Markup("".join(parts))
