"""Many observations folded into a histogram at once.

`Histogram.observe` takes the sum's lock and then a bucket's, once per value,
and finds the bucket by walking the bounds in Python: for a loop turn's
receipts, two histograms each, that was a fifth of what metering cost. Folded,
each touched bucket and the sum are updated once per batch, with the same
result a scrape sees (the sum up to the order of float additions).

This reads prometheus_client's histogram internals (`_upper_bounds`,
`_buckets`, `_sum`), the same in its single- and multi-process modes, and
stable across the versions the project allows; `tests/observability`
compares every bucket with `observe` value by value, so a version that
changes them fails there.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

from prometheus_client import Histogram


def observe_all(histogram: Histogram, amounts: Sequence[float]) -> None:
    """`histogram.observe(amount)` for every amount (a labelled child, or a
    histogram without labels)."""
    if len(amounts) <= 1:
        for amount in amounts:
            histogram.observe(amount)
        return
    bounds = histogram._upper_bounds
    counts: dict[int, int] = {}
    for amount in amounts:
        # The first bound at or above the amount: `observe`'s `amount <= bound`.
        index = bisect_left(bounds, amount)
        counts[index] = counts.get(index, 0) + 1
    histogram._raise_if_not_observable()  # type: ignore[no-untyped-call]
    histogram._sum.inc(sum(amounts))
    buckets = histogram._buckets
    for index, count in counts.items():
        buckets[index].inc(count)
