"""Bounded label vocabularies."""

from __future__ import annotations

from app.observability.labels import (
    OTHER,
    CappedVocabulary,
    Vocabulary,
    http_method,
    status_class,
)


def test_a_vocabulary_maps_unknown_values_to_other() -> None:
    tools = Vocabulary(["echo", "leak"])

    assert [tools("echo"), tools("nope"), tools(None)] == ["echo", OTHER, OTHER]


def test_a_capped_vocabulary_stops_growing_at_its_cap() -> None:
    reasons = CappedVocabulary(3)

    labels = [reasons(f"reason_{i}") for i in range(10)]

    assert labels[:3] == ["reason_0", "reason_1", "reason_2"]
    assert set(labels[3:]) == {OTHER}
    assert reasons("reason_1") == "reason_1"


def test_a_capped_vocabulary_refuses_free_text() -> None:
    reasons = CappedVocabulary(100)

    assert reasons("has spaces") == OTHER
    assert reasons("x" * 65) == OTHER
    assert reasons("") == OTHER
    assert reasons(None) == OTHER
    assert reasons("max_turns") == "max_turns"


def test_status_classes_and_methods() -> None:
    assert [status_class(s) for s in (200, 204, 404, 503, 42, 600)] == [
        "2xx",
        "2xx",
        "4xx",
        "5xx",
        OTHER,
        OTHER,
    ]
    assert [http_method(m) for m in ("GET", "POST", "BREW", "get")] == [
        "GET",
        "POST",
        OTHER,
        OTHER,
    ]
