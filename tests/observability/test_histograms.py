"""Observations folded into a histogram read as the same observations one by one."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Histogram

from app.observability.histograms import observe_all

BUCKETS = (0.001, 0.01, 0.1, 1.0)
AMOUNTS = [0.0, 0.0005, 0.001, 0.0010001, 0.01, 0.05, 0.1, 0.7, 1.0, 3.0, 1e9, -2.0, 0.05]


def _histogram() -> Histogram:
    return Histogram("h", "h", ["tool"], buckets=BUCKETS, registry=CollectorRegistry())


def _samples(histogram: Histogram) -> dict[tuple[str, str], float]:
    (family,) = histogram.collect()
    return {
        (sample.name, sample.labels.get("le", "")): sample.value
        for sample in family.samples
        if not sample.name.endswith("_created")
    }


@pytest.mark.parametrize("amounts", [AMOUNTS, AMOUNTS[:1], []])
def test_folded_observations_read_as_observations_one_by_one(amounts: list[float]) -> None:
    one_by_one, folded = _histogram(), _histogram()
    child = one_by_one.labels("t")
    for amount in amounts:
        child.observe(amount)

    observe_all(folded.labels("t"), amounts)
    observe_all(folded.labels("t"), [])

    expected, got = _samples(one_by_one), _samples(folded)
    assert got.pop(("h_sum", "")) == pytest.approx(expected.pop(("h_sum", "")))
    assert got == expected  # every bucket (cumulative) and the count


def test_a_histogram_with_labels_takes_no_folded_observations_itself() -> None:
    with pytest.raises(ValueError, match="label"):
        observe_all(_histogram(), [0.1, 0.2])
