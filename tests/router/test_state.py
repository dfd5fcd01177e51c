"""The router state's duplicate check, kept as a set beside the ordered list."""

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
