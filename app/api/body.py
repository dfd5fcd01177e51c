"""Reading a JSON request body under the server's size and nesting limits."""

from __future__ import annotations

from typing import Any, TypeVar

import orjson
from fastapi import Request
from pydantic import BaseModel, ValidationError

from app.api.body_hazards import body_hazards, escape_token
from app.api.problems import PayloadTooLarge, pointer_from_loc
from app.service.errors import InvalidRequest, ProblemItem

M = TypeVar("M", bound=BaseModel)


async def read_json(request: Request, max_bytes: int, max_depth: int) -> Any:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise PayloadTooLarge(f"The request body exceeds the limit of {max_bytes} bytes.")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > max_bytes:
            raise PayloadTooLarge(f"The request body exceeds the limit of {max_bytes} bytes.")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(
            "The request body is not valid JSON.", errors=[ProblemItem("", str(exc))]
        ) from None
    # A document nests at most as deep as it has opening brackets (counted in C,
    # strings included): most bodies need no walk.
    if body.count(b"{") + body.count(b"[") > max_depth:
        too_deep = _first_pointer_deeper_than(data, max_depth)
        if too_deep is not None:
            raise InvalidRequest(
                f"The request body nests deeper than {max_depth} levels.",
                errors=[ProblemItem(too_deep, f"nesting deeper than {max_depth} levels")],
            )
    hazards = body_hazards(body, data)
    if hazards:
        raise InvalidRequest(
            "The request body holds U+0000 or repeats a key in an object.", errors=hazards
        )
    return data


def _first_pointer_deeper_than(data: Any, max_depth: int) -> str | None:
    stack: list[tuple[Any, int, str]] = [(data, 0, "")]
    while stack:
        value, depth, pointer = stack.pop()
        if isinstance(value, dict):
            children: Any = value.items()
        elif isinstance(value, list):
            children = enumerate(value)
        else:
            continue
        if depth + 1 > max_depth:
            return pointer
        for key, child in children:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1, f"{pointer}/{escape_token(str(key))}"))
    return None


def parse_model(model: type[M], data: Any) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        items = [
            ProblemItem(pointer_from_loc(error["loc"]), error["msg"]) for error in exc.errors()
        ]
        raise InvalidRequest("The request is invalid.", errors=items) from None
