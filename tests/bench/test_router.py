"""The router section's judgement: ratios taken per round, then the median."""

from __future__ import annotations

import pytest

from bench.router import INCLUSIVE, OURS, OWN, PEER, judge, subject
from bench.stats import Sample


def _samples(readings: dict[tuple[str, str], list[float]]) -> dict[str, Sample]:
    samples = {}
    for (who, length), values in readings.items():
        samples[subject(who, length, OWN)] = Sample("µs/turn (CPU)", values)
        # The inclusive readings: the same runs, the model transport counted too.
        samples[subject(who, length, INCLUSIVE)] = Sample(
            "µs/turn (CPU)", [value * 2 for value in values]
        )
    return samples


def test_each_ratio_is_the_median_of_the_rounds_ratios() -> None:
    derived, checks = judge(
        _samples(
            {
                (OURS, "20"): [5.0, 5.0, 5.0],
                (OURS, "200"): [10.0, 20.0, 60.0],
                (PEER, "20"): [20.0, 10.0, 5.0],
                (PEER, "200"): [100.0, 30.0, 70.0],
            }
        )
    )

    at_200 = derived["per turn, 200 turns: router / pydantic-ai (own)"]
    assert at_200.values == pytest.approx([0.1, 20 / 30, 60 / 70])
    # Per round, then the median: 0.67, where the ratio of the medians would read 0.29.
    assert at_200.median == pytest.approx(20 / 30)
    assert derived["per turn, 20 turns: router / pydantic-ai (own)"].values == [0.25, 0.5, 1.0]
    assert derived["per turn at 200 / at 20, router (own)"].values == [2.0, 4.0, 12.0]
    assert derived["per turn at 200 / at 20, pydantic-ai (own)"].values == [5.0, 3.0, 14.0]
    assert [(check.target.split(" (")[0], check.met) for check in checks] == [
        ("6 router per turn vs Pydantic AI's agent loop, 20 turns", True),  # 0.5: on the bound
        ("6 router per turn vs Pydantic AI's agent loop, 200 turns", False),
        ("6 router per turn at 200 turns vs at 20", False),
        ("6 router per turn vs Pydantic AI, 200 turns", None),  # inclusive: reference only
        ("6 router per turn at 200 turns vs at 20", None),
    ]


def test_the_targets_hold_within_their_bounds() -> None:
    _, checks = judge(
        _samples(
            {
                (OURS, "20"): [40.0, 50.0, 45.0],
                (OURS, "200"): [44.0, 52.0, 50.0],
                (PEER, "20"): [100.0, 120.0, 95.0],
                (PEER, "200"): [300.0, 280.0, 310.0],
            }
        )
    )

    judged = [check for check in checks if check.met is not None]
    assert [check.bound for check in judged] == ["≤ 0.5x", "≤ 0.5x", "≤ 1.2x"]
    assert all(check.met for check in judged)
    assert [check.met for check in checks if check.note] == [None, None]
