"""Every operation as a description of its HTTP request, shared by the sync and the
async client: each of them only sends what is described here."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

JsonObject = dict[str, Any]


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    json: JsonObject | None = None
    params: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    idempotency_key: str | None = None


def mint_key() -> str:
    return uuid.uuid4().hex


def _start(path: str, body: JsonObject, key: str | None, respond_async: bool) -> Operation:
    key = key or mint_key()
    headers = {"Idempotency-Key": key}
    if respond_async:
        headers["Prefer"] = "respond-async"
    return Operation("POST", path, json=body, headers=headers, idempotency_key=key)


def without_none(**members: Any) -> JsonObject:
    return {name: value for name, value in members.items() if value is not None}


def sequential_plan(
    owner: str,
    calls: Sequence[Mapping[str, Any]],
    *,
    context: Mapping[str, Any] | None = None,
    deadline_s: float | None = None,
    idempotency_key: str | None = None,
    respond_async: bool = False,
) -> Operation:
    body = without_none(
        owner=owner,
        calls=[dict(c) for c in calls],
        context=None if context is None else dict(context),
        deadline_s=deadline_s,
    )
    return _start("/plans/sequential", body, idempotency_key, respond_async)


def parallel_plan(
    owner: str,
    lanes: Sequence[Mapping[str, Any]],
    *,
    max_concurrency: int,
    context: Mapping[str, Any] | None = None,
    deadline_s: float | None = None,
    idempotency_key: str | None = None,
    respond_async: bool = False,
) -> Operation:
    body = without_none(
        owner=owner,
        max_concurrency=max_concurrency,
        lanes=[dict(lane) for lane in lanes],
        context=None if context is None else dict(context),
        deadline_s=deadline_s,
    )
    return _start("/plans/parallel", body, idempotency_key, respond_async)


def router_run(
    request: Mapping[str, Any],
    *,
    idempotency_key: str | None = None,
    respond_async: bool = False,
) -> Operation:
    """`request` is the `POST /router/runs` body (owner, goal, profiles, budgets, ...)."""
    return _start("/router/runs", dict(request), idempotency_key, respond_async)


def resume(run_id: str, original_body: Mapping[str, Any], key: str | None = None) -> Operation:
    return _start(f"/runs/{run_id}/resume", dict(original_body), key, respond_async=False)


def get(path: str, **params: Any) -> Operation:
    return Operation("GET", path, params=query(**params))


def post(path: str, body: JsonObject | None = None) -> Operation:
    return Operation("POST", path, json=body)


def query(**params: Any) -> dict[str, str]:
    """Query parameters as ToolLoop reads them: None left out, times in RFC 3339, booleans
    in lower case."""
    found: dict[str, str] = {}
    for name, value in params.items():
        if value is None:
            continue
        if isinstance(value, datetime):
            if value.tzinfo is None:
                raise ValueError(f"{name}: a datetime needs a time zone")
            found[name] = value.isoformat()
        elif isinstance(value, bool):
            found[name] = "true" if value else "false"
        else:
            found[name] = str(value)
    return found
