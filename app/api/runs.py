"""`GET /runs`, `GET /runs/{run_id}`, the run's receipts and audit events, and its proof.

A key sees only the runs it created unless it holds `runs:read:all` (or
`admin`); anyone else's run answers 404, as if it did not exist. A run's
receipts (by `seq`, input order) and audit events (in write order) are pages
of 500 by default, 1,000 at most; `GET /runs` pages newest first, 50 by
default, 500 at most.
"""

from __future__ import annotations

from functools import partial
from typing import Annotated

from fastapi import APIRouter, Path, Query

from app.api.auth import RunsReader
from app.api.deps import RuntimeDep
from app.api.pagination import (
    MAX_AUDIT_ID,
    MAX_SEQ,
    keyset_cursor,
    page_answer,
    parse_keyset_cursor,
    parse_position_cursor,
    parse_position_cursor_of,
    position_cursor,
)
from app.api.query_params import KnownQueryOnly
from app.api.responses import FastJSONResponse
from app.api.schemas.proof import ProofOut
from app.api.schemas.runs import (
    DEFAULT_PAGE,
    DEFAULT_RUN_PAGE,
    LIST_PROBLEMS,
    RUN_PROBLEMS,
    AuditPage,
    Cursor,
    FilterText,
    PageLimit,
    ReceiptPage,
    RunKind,
    RunOut,
    RunPage,
    RunPageLimit,
    RunStatus,
    Since,
    Text,
    Until,
)
from app.service.evidence.proof import ProofService
from app.service.runs.reads import ReadService, RunFilters

# An audit cursor names an event id. An earlier version's ids counted two to a
# stored row; its cursors (that listing's name) are still taken, converted.
AUDIT_LISTING = "run-audit-events"
EARLIER_AUDIT_LISTING = "run-audit"
AUDIT_LISTINGS = (AUDIT_LISTING, EARLIER_AUDIT_LISTING)

router = APIRouter(prefix="/runs", tags=["runs"])

RunPath = Annotated[Text, Path()]


@router.get(
    "",
    operation_id="listRuns",
    response_class=FastJSONResponse,
    responses={200: {"model": RunPage}, **LIST_PROBLEMS},
)
async def list_runs(
    runtime: RuntimeDep,
    viewer: RunsReader,
    owner: FilterText = None,
    status: Annotated[RunStatus | None, Query()] = None,
    kind: Annotated[RunKind | None, Query()] = None,
    caller: Annotated[
        FilterText,
        Query(description="The creating key's name; other keys only ever see their own runs."),
    ] = None,
    since: Since = None,
    until: Until = None,
    limit: PageLimit = DEFAULT_PAGE,
    cursor: Cursor = None,
    _known: KnownQueryOnly = None,
) -> FastJSONResponse:
    after = parse_keyset_cursor("runs", cursor)
    filters = RunFilters(
        owner=owner, status=status, kind=kind, caller=caller, since=since, until=until
    )
    listing = await ReadService(runtime.sessions).list_runs(
        filters, viewer, limit=limit, after=after
    )
    return page_answer(listing, partial(keyset_cursor, "runs"))


@router.get(
    "/{run_id}",
    operation_id="getRun",
    response_class=FastJSONResponse,
    responses={200: {"model": RunOut}, **RUN_PROBLEMS},
)
async def get_run(
    runtime: RuntimeDep, viewer: RunsReader, run_id: RunPath, _known: KnownQueryOnly = None
) -> FastJSONResponse:
    return FastJSONResponse(await ReadService(runtime.sessions).get_run(run_id, viewer))


@router.get(
    "/{run_id}/proof",
    operation_id="getRunProof",
    response_class=FastJSONResponse,
    responses={200: {"model": ProofOut}, **RUN_PROBLEMS},
)
async def get_run_proof(
    runtime: RuntimeDep, viewer: RunsReader, run_id: RunPath, _known: KnownQueryOnly = None
) -> FastJSONResponse:
    """The run's hash chain: every chained row's recomputed digest and stored link, the
    checkpoints from the first that holds the run to the latest, and the check of both."""
    return FastJSONResponse(await ProofService(runtime.sessions).proof(run_id, viewer))


@router.get(
    "/{run_id}/receipts",
    operation_id="listRunReceipts",
    response_class=FastJSONResponse,
    responses={200: {"model": ReceiptPage}, **RUN_PROBLEMS},
)
async def list_run_receipts(
    runtime: RuntimeDep,
    viewer: RunsReader,
    run_id: RunPath,
    limit: RunPageLimit = DEFAULT_RUN_PAGE,
    cursor: Cursor = None,
    _known: KnownQueryOnly = None,
) -> FastJSONResponse:
    after = parse_position_cursor("run-receipts", cursor, maximum=MAX_SEQ)
    listing = await ReadService(runtime.sessions).list_run_receipts(
        run_id, viewer, limit=limit, after_seq=after
    )
    return page_answer(listing, partial(position_cursor, "run-receipts"))


@router.get(
    "/{run_id}/audit",
    operation_id="listRunAudit",
    response_class=FastJSONResponse,
    responses={200: {"model": AuditPage}, **RUN_PROBLEMS},
)
async def list_run_audit(
    runtime: RuntimeDep,
    viewer: RunsReader,
    run_id: RunPath,
    limit: RunPageLimit = DEFAULT_RUN_PAGE,
    cursor: Cursor = None,
    _known: KnownQueryOnly = None,
) -> FastJSONResponse:
    found = parse_position_cursor_of(AUDIT_LISTINGS, cursor, maximum=MAX_AUDIT_ID)
    after = None
    if found is not None:
        listing_name, after = found
        if listing_name == EARLIER_AUDIT_LISTING:
            after = ReadService.audit_event_id_of_earlier_version(after, MAX_AUDIT_ID)
    listing = await ReadService(runtime.sessions).list_run_audit(
        run_id, viewer, limit=limit, after_id=after
    )
    return page_answer(listing, partial(position_cursor, AUDIT_LISTING))
