"""The router state's duplicate check, kept as a set beside the ordered list, and the
usage of a lost attempt counted from the run's usage all told."""

from __future__ import annotations

from app.router.state import RouterState


def test_remembered_fingerprints_are_seen_in_order_and_after_a_checkpoint() -> None:
    state = RouterState(60.0)
    for fingerprint in ("sha256:b", "sha256:a", "sha256:c"):
        state.remember(fingerprint)

    restored = RouterState.load(state.dump())

    for kept in (state, restored):
        assert kept.fingerprints == ["sha256:b", "sha256:a", "sha256:c"]
        assert kept.seen("sha256:a")
        assert not kept.seen("sha256:d")
    assert restored.to_public()["fingerprints"] == ["sha256:b", "sha256:a", "sha256:c"]


def test_usage_a_lost_attempt_spent_is_counted_once() -> None:
    state = RouterState(60.0)
    state.add_usage(10, 5, 1.0, None)

    state.add_unseen_usage(3, 30, 15, 700)  # two requests the state never saw
    state.add_unseen_usage(3, 30, 15, 700)  # told again: nothing more to count

    assert (state.model_calls, state.input_tokens, state.output_tokens) == (3, 30, 15)
    assert state.tokens == 45
    assert state.cost_nanos == 700
    state.add_unseen_usage(1, 0, 0, None)  # behind what the state counted: no change
    assert (state.model_calls, state.tokens, state.cost_nanos) == (3, 45, 700)
