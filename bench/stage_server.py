"""Our server with its plan route cut short at one stage, for the HTTP section's
CPU ledger: `python -m bench.stage_server STAGE serve ...` (then the arguments
of `toolloop serve`).

- `read-quiet`: the sequential plan route answers once it has read its body,
  with the access line off;
- `read`: the same, with the access line;
- `parsed`: the route answers once it has parsed the plan.

The answer is the floor's (`bench/floor_app.py`). Everything else is the
service as `toolloop serve` builds it: its middleware, its runtime and
database, its collector settings. Only the route's next steps are swapped,
here, before the server starts; nothing of this is in `app/`.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import Any

from fastapi import Request
from starlette.responses import Response

import app.api.plans as plans
from app import cli
from app.api.responses import FastJSONResponse
from app.observability.logging import ACCESS_LOGGER

STAGES = ("read-quiet", "read", "parsed")


async def _answer(request: Request, runtime: Any, principal: Any, data: Any, *_: Any) -> Response:
    calls = data.get("calls", ()) if isinstance(data, dict) else ()
    return FastJSONResponse({"plan_id": "floor", "status": "succeeded", "calls": len(calls)})


def _body_as_plan(data: Any) -> Any:
    return data  # a non-empty body: the route takes it as its plan and parses nothing


def main(argv: Sequence[str]) -> int:
    if not argv or argv[0] not in STAGES:
        print(f"usage: python -m bench.stage_server {{{','.join(STAGES)}}} serve ...")
        return 2
    stage = argv[0]
    # The route calls these through its module's globals.
    vars(plans)["start_run"] = _answer
    if stage != "parsed":
        vars(plans)["sequential_plan"] = _body_as_plan
    if stage == "read-quiet":
        logging.getLogger(ACCESS_LOGGER).setLevel(logging.WARNING)
    return cli.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
