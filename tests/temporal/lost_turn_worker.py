"""`toolloop worker` whose router turn that paused the run is lost right after it
recorded the pause: the process kills itself (SIGKILL) before the turn returns, as a
crash at that point would. Run as `python -m tests.temporal.lost_turn_worker run` with
the stack's environment."""

from __future__ import annotations

import os
import signal
import sys

from temporalio import activity

from app.contract import load_contract
from app.database_command import run_on_database
from app.observability.logging import configure_logging
from app.settings import Settings
from app.temporal import worker
from app.temporal.router_activities import RouterActivities
from app.temporal.router_messages import PAUSED, ROUTER_TURN, RouterStep, RouterTurnInput


class LostAfterPausing(RouterActivities):
    @activity.defn(name=ROUTER_TURN)
    async def turn(self, given: RouterTurnInput) -> RouterStep:
        step = await super().turn(given)
        if step.status == PAUSED:
            os.kill(os.getpid(), signal.SIGKILL)
        return step


def main() -> int:
    settings = Settings()
    contract = load_contract(settings.registries, settings.allowed_modules)
    configure_logging(settings.log_level, settings.log_format)
    worker.RouterActivities = LostAfterPausing  # type: ignore[misc]
    run_on_database(settings.database_url, worker.serve_worker(settings, contract))
    return 0


if __name__ == "__main__":
    sys.exit(main())
