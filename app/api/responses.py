"""A JSON response rendered with orjson (the plans API returns large receipt lists)."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi.responses import JSONResponse


class FastJSONResponse(JSONResponse):
    def render(self, content: Any) -> bytes:
        try:
            # String keys only first: orjson's quicker path; OPT_NON_STR_KEYS
            # slows every object down.
            return orjson.dumps(content)
        except TypeError:
            return orjson.dumps(content, option=orjson.OPT_NON_STR_KEYS)
