from __future__ import annotations

import pytest

from app.api.auth.throttle import FailedAuthThrottle


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_failures_within_the_burst_pass_then_the_address_waits() -> None:
    clock = FakeClock()
    throttle = FailedAuthThrottle(burst=3, per_minute=6, clock=clock)

    assert [throttle.record_failure("a") for _ in range(3)] == [None, None, None]
    assert throttle.record_failure("a") == 10
    assert throttle.blocked_for("a") == 10


def test_a_token_refills_over_time() -> None:
    clock = FakeClock()
    throttle = FailedAuthThrottle(burst=1, per_minute=6, clock=clock)
    throttle.record_failure("a")

    clock.now += 4
    assert throttle.blocked_for("a") == 6
    clock.now += 6
    assert throttle.blocked_for("a") is None
    assert throttle.record_failure("a") is None


def test_addresses_are_counted_apart() -> None:
    throttle = FailedAuthThrottle(burst=1, per_minute=1, clock=FakeClock())
    throttle.record_failure("a")

    assert throttle.blocked_for("a") == 60
    assert throttle.blocked_for("b") is None
    assert throttle.record_failure("b") is None


def test_the_least_recent_addresses_are_forgotten_beyond_the_limit() -> None:
    throttle = FailedAuthThrottle(burst=1, per_minute=1, max_addresses=2, clock=FakeClock())
    for address in ("a", "b", "c"):
        throttle.record_failure(address)

    assert throttle.blocked_for("a") is None
    assert throttle.blocked_for("b") == 60
    assert throttle.blocked_for("c") == 60


@pytest.mark.parametrize("kwargs", [{"burst": 0}, {"per_minute": 0.0}, {"max_addresses": 0}])
def test_limits_are_validated(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        FailedAuthThrottle(**kwargs)  # type: ignore[arg-type]
