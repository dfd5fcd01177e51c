"""`toolloop audit export RUN_ID | --since T [--until T] --out FILE`: write an audit bundle.

Reads the database (`TOOLLOOP_DATABASE_URL` or `--database-url`) through
`app.database_command.read_database`, and changes nothing in it. The bundle is
written beside FILE first and moved into place once complete, so FILE is never
a bundle cut short.
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.service.errors import RunNotFound, StorageUnavailable
from app.service.evidence.export import ExportService, RunSelection, Selection

EXPORTED = 0
FAILED = 1


async def export(
    sessions: async_sessionmaker[AsyncSession], selection: Selection, out: Path
) -> tuple[int, str]:
    """(exit status, what to tell: the file written, or the problem)."""
    partial = out.with_name(out.name + ".partial")
    lines = 0
    try:
        with partial.open("wb") as file:
            async for line in ExportService(sessions).bundle(selection):
                file.write(line)
                lines += 1
        os.replace(partial, out)
    except RunNotFound:
        named = selection.run_id if isinstance(selection, RunSelection) else ""
        return FAILED, f"there is no run {named}"
    except StorageUnavailable as exc:
        return FAILED, str(exc)
    except OSError as exc:
        return FAILED, f"cannot write {out}: {exc.strerror or type(exc).__name__}"
    finally:
        partial.unlink(missing_ok=True)
    return EXPORTED, f"wrote {out}: {lines} lines"
