"""`GET /usage`: model tokens and cost, summed per hour or day, owner, caller and profile.

Newest bucket first, then by owner, caller and profile. `since` and `until`
select requests by when they were answered. A key without `runs:read:all`
sees only its own usage.
"""

from __future__ import annotations

from functools import partial
from typing import Annotated

from fastapi import APIRouter, Query

from app.api.auth import RunsReader
from app.api.deps import RuntimeDep
from app.api.pagination import page_answer, parse_usage_cursor, usage_cursor
from app.api.query_params import KnownQueryOnly
from app.api.responses import FastJSONResponse
from app.api.schemas.runs import (
    DEFAULT_PAGE,
    LIST_PROBLEMS,
    Cursor,
    FilterText,
    PageLimit,
    Since,
    Until,
)
from app.api.schemas.usage import BucketName, UsagePage
from app.service.usage.reads import UsageFilters, UsageReads

router = APIRouter(tags=["usage"])


@router.get(
    "/usage",
    operation_id="listUsage",
    response_class=FastJSONResponse,
    responses={200: {"model": UsagePage}, **LIST_PROBLEMS},
)
async def list_usage(
    runtime: RuntimeDep,
    viewer: RunsReader,
    bucket: Annotated[BucketName, Query(description="The length of each sum.")] = "day",
    owner: FilterText = None,
    caller: FilterText = None,
    profile: FilterText = None,
    since: Since = None,
    until: Until = None,
    limit: PageLimit = DEFAULT_PAGE,
    cursor: Cursor = None,
    _known: KnownQueryOnly = None,
) -> FastJSONResponse:
    after = parse_usage_cursor(bucket, cursor)
    filters = UsageFilters(owner=owner, caller=caller, profile=profile, since=since, until=until)
    listing = await UsageReads(runtime.sessions).list_usage(
        bucket, filters, viewer, limit=limit, after=after
    )
    return page_answer(listing, partial(usage_cursor, bucket))
