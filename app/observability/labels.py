"""Label values that stay bounded whatever callers send."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from typing import Generic, TypeVar

from prometheus_client.metrics import MetricWrapperBase

M = TypeVar("M", bound=MetricWrapperBase)

OTHER = "other"

HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

_WELL_FORMED = re.compile(r"[A-Za-z][A-Za-z0-9_.:-]{0,63}")


class Vocabulary:
    """A fixed set of label values; anything outside it is `other`."""

    __slots__ = ("_known",)

    def __init__(self, known: Iterable[str]) -> None:
        self._known = frozenset(known)

    def __call__(self, value: str | None) -> str:
        return value if value in self._known else OTHER


class CappedVocabulary:
    """Well-formed values, first come first served, up to `cap` distinct ones.

    For vocabularies the service does not know up front but that are bounded
    by configuration (model profiles, the router's stop reasons): a bug that
    passes free text cannot grow the series count beyond the cap.
    """

    __slots__ = ("_cap", "_lock", "_seen")

    def __init__(self, cap: int) -> None:
        self._cap = cap
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, value: str | None) -> str:
        if value is None or not _WELL_FORMED.fullmatch(value):
            return OTHER
        if value in self._seen:
            return value
        with self._lock:
            if len(self._seen) >= self._cap:
                return OTHER
            self._seen.add(value)
        return value


class Children(Generic[M]):
    """A labelled metric's children, looked up by their label values.

    `metric.labels(...)` checks, stringifies and locks on every call; on the
    request path that cost more than the counting itself. Label values are
    bounded by construction (see `metrics`), so is this cache. `labels` returns
    the same child for the same values, so a race only repeats a lookup.
    """

    __slots__ = ("_children", "_metric")

    def __init__(self, metric: M) -> None:
        self._metric = metric
        self._children: dict[tuple[str, ...], M] = {}

    def __call__(self, *values: str) -> M:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self._metric.labels(*values)
        return child


def http_method(method: str) -> str:
    return method if method in HTTP_METHODS else OTHER


def status_class(status: int) -> str:
    return f"{status // 100}xx" if 100 <= status <= 599 else OTHER
