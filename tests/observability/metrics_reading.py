"""Reading this process's metric values in tests (always as before/after deltas), as a
scrape reads them: the updates held back for the end of a loop turn applied first."""

from __future__ import annotations

from app.observability.exposition import flush_buffered
from app.observability.metrics import REGISTRY


def value(name: str, **labels: str) -> float:
    flush_buffered()
    found = REGISTRY.get_sample_value(name, labels)
    return 0.0 if found is None else found


def series() -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    """Every (sample name, labels) the registry exports."""
    return {
        (sample.name, tuple(sorted(sample.labels.items())))
        for metric in REGISTRY.collect()
        for sample in metric.samples
    }
