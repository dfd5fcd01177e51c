"""Small SVG charts for the tools page."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from markupsafe import Markup


def bar_chart(values: Sequence[float], highlight: Sequence[float], label: str) -> Markup:
    """A small bar chart (e.g. calls per hour, with the failed part of each bar)."""
    width, height = 240, 40
    top = max(values, default=0) or 1
    step = width / max(len(values), 1)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="spark" role="img" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'aria-label="{escape(label)}">'
    ]
    for index, value in enumerate(values):
        bar = value / top * (height - 2)
        part = (highlight[index] if index < len(highlight) else 0) / top * (height - 2)
        x = index * step
        parts.append(
            f'<rect class="calls" x="{x:.1f}" y="{height - bar:.1f}" '
            f'width="{step - 1:.1f}" height="{bar:.1f}"/>'
        )
        if part:
            parts.append(
                f'<rect class="failed" x="{x:.1f}" y="{height - part:.1f}" '
                f'width="{step - 1:.1f}" height="{part:.1f}"/>'
            )
    parts.append("</svg>")
    return Markup("".join(parts))
