"""`GET /receipts`: stored (redacted) receipts across runs, newest first.

Pages of 50 by default, 500 at most, ordered by `(created_at, receipt_id)`
descending so receipts stored in the same instant still page exactly once.
A key without `runs:read:all` sees only the receipts of runs it created.
"""

from __future__ import annotations

from functools import partial
from typing import Annotated

from fastapi import APIRouter, Query

from app.api.auth import RunsReader
from app.api.deps import RuntimeDep
from app.api.pagination import keyset_cursor, page_answer, parse_keyset_cursor
from app.api.query_params import KnownQueryOnly
from app.api.responses import FastJSONResponse
from app.api.schemas.runs import (
    DEFAULT_PAGE,
    LIST_PROBLEMS,
    Cursor,
    FilterText,
    PageLimit,
    ReceiptPage,
    ReceiptStatus,
    Since,
    Until,
)
from app.service.runs.reads import ReadService, ReceiptFilters

router = APIRouter(tags=["receipts"])


@router.get(
    "/receipts",
    operation_id="listReceipts",
    response_class=FastJSONResponse,
    responses={200: {"model": ReceiptPage}, **LIST_PROBLEMS},
)
async def list_receipts(
    runtime: RuntimeDep,
    viewer: RunsReader,
    run_id: FilterText = None,
    tool: FilterText = None,
    owner: FilterText = None,
    status: Annotated[ReceiptStatus | None, Query()] = None,
    item_key: FilterText = None,
    cache_hit: bool | None = None,
    since: Since = None,
    until: Until = None,
    limit: PageLimit = DEFAULT_PAGE,
    cursor: Cursor = None,
    _known: KnownQueryOnly = None,
) -> FastJSONResponse:
    after = parse_keyset_cursor("receipts", cursor)
    filters = ReceiptFilters(
        run_id=run_id,
        tool=tool,
        owner=owner,
        status=status,
        item_key=item_key,
        cache_hit=cache_hit,
        since=since,
        until=until,
    )
    listing = await ReadService(runtime.sessions).list_receipts(
        filters, viewer, limit=limit, after=after
    )
    return page_answer(listing, partial(keyset_cursor, "receipts"))
