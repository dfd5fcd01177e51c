"""Samples, medians and ratios to a floor measured in the same run.

Each comparison runs its subjects in rounds, one after another inside a round
(the order rotates), so a noisy neighbour slows subject and floor alike; a
ratio is taken per round and the median of those ratios is reported.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# CPU time of this process: for in-process work that never waits, it is the
# cost itself, minus the time other processes held the CPU.
cpu_clock = time.process_time
wall_clock = time.perf_counter


@dataclass
class Sample:
    """Repeated measurements of one quantity (per-call µs, seconds, rows/s...)."""

    unit: str
    values: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)

    def to_dict(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "median": self.median,
            "min": self.low,
            "max": self.high,
            "n": len(self.values),
        }

    def __str__(self) -> str:
        return f"{fmt(self.median)} {self.unit} (min {fmt(self.low)}, max {fmt(self.high)})"


def fmt(value: float) -> str:
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def ratios(subject: Sample, floor: Sample) -> Sample:
    """Per-round ratios subject/floor (both measured in the same rounds)."""
    return Sample("x", [a / b for a, b in zip(subject.values, floor.values, strict=True)])


Measure = Callable[[], Awaitable[float]]


async def rounds(subjects: Mapping[str, Measure], count: int, unit: str) -> dict[str, Sample]:
    """Run every subject once per round, rotating the order; each returns one value."""
    names = list(subjects)
    samples = {name: Sample(unit) for name in names}
    for index in range(count):
        shift = index % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].values.append(await subjects[name]())
    return samples


@dataclass
class Check:
    """One target: the figure, its bound and whether it holds."""

    target: str
    figure: str
    bound: str
    met: bool | None  # None: not measured here
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "figure": self.figure,
            "bound": self.bound,
            "met": self.met,
            "note": self.note,
        }


@dataclass
class Section:
    """What one benchmark module reports: samples by name, and target checks."""

    name: str
    command: str
    samples: dict[str, Sample] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, samples: Mapping[str, Sample]) -> None:
        self.samples.update(samples)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "command": self.command,
            "samples": {key: sample.to_dict() for key, sample in self.samples.items()},
            "checks": [check.to_dict() for check in self.checks],
            "notes": self.notes,
        }

    def render(self) -> str:
        lines = [f"## {self.name}", f"`{self.command}`", ""]
        lines += [f"- {key}: {sample}" for key, sample in self.samples.items()]
        for check in self.checks:
            verdict = {True: "MET", False: "MISSED", None: "n/a"}[check.met]
            note = f" — {check.note}" if check.note else ""
            lines.append(
                f"- [{verdict}] {check.target}: {check.figure} (bound {check.bound}){note}"
            )
        lines += [f"- note: {note}" for note in self.notes]
        return "\n".join(lines)


def per_call_us(elapsed_s: float, calls: int) -> float:
    return elapsed_s / calls * 1e6


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]
