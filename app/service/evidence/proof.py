"""A run's proof: its chain as stored, rechecked, and the checkpoints that vouch for it.

The same visibility as the run itself (`app.service.runs.reads`): a run the
viewer may not see does not exist for them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.foundation.chain_check import Chain, chains_of, check
from app.service.errors import RunNotFound, StorageUnavailable
from app.service.evidence.stored import stored_rows
from app.service.runs.reads import RunViewer
from app.store.repositories.chain import ChainRepository
from app.store.repositories.runs import RunRepository

logger = logging.getLogger("toolloop.evidence")


@dataclass(frozen=True, slots=True)
class ProofService:
    sessions: async_sessionmaker[AsyncSession]

    async def proof(self, run_id: str, viewer: RunViewer) -> dict[str, Any]:
        try:
            async with self.sessions() as session:
                run = await RunRepository(session).get(run_id)
                if run is None or not viewer.can_see_run(run.caller):
                    raise RunNotFound(run_id)
                chain_rows = ChainRepository(session)
                receipts = stored_rows(await chain_rows.receipts_of([run_id]))
                audit = stored_rows(await chain_rows.audit_rows_of([run_id]))
                first = await chain_rows.first_checkpoint_covering([run_id], run.created_at)
                checkpoints = (
                    [] if first is None else stored_rows(await chain_rows.checkpoints_from(first))
                )
        except SQLAlchemyError as exc:
            logger.error("a read of the chain failed: %s", exc)
            raise StorageUnavailable("The store could not be read; retry shortly.") from exc
        chain = chains_of(receipts, audit).get(run_id) or Chain(run_id)
        findings = check({run_id: chain}, checkpoints)
        return {
            "run_id": run_id,
            "length": chain.length,
            "head": chain.head,
            "unchained": chain.unchained,
            "entries": [
                {
                    "position": entry.position,
                    "table": entry.table,
                    "row_id": entry.row_id,
                    "digest": entry.digest,
                    "link": entry.link,
                }
                for entry in chain.entries
            ],
            "superseded": [
                {"position": former.position, "digest": former.digest, "link": former.link}
                for former in sorted(chain.superseded, key=lambda former: former.position)
            ],
            "checkpoint": checkpoints[0] if checkpoints else None,
            "checkpoints": checkpoints,
            "check": {
                "intact": findings.intact,
                "problems": findings.problems,
                "notes": findings.notes,
            },
        }
