"""`toolloop audit export RUN_ID | --since T [--until T] --out FILE`: write an audit bundle.

Reads the database (`TOOLLOOP_DATABASE_URL` or `--database-url`) and changes
nothing in it. The bundle is written beside FILE first and moved into place
once complete, so FILE is never a bundle cut short.
"""

from __future__ import annotations

import os
from pathlib import Path

from app.service.errors import RunNotFound, StorageUnavailable
from app.service.evidence.export import ExportService, RunSelection, Selection
from app.settings import Settings
from app.store.database import (
    DatabaseUnavailable,
    check_database,
    create_database_engine,
    create_session_factory,
)

EXPORTED = 0
FAILED = 1


async def export(settings: Settings, selection: Selection, out: Path) -> tuple[int, str]:
    """(exit status, what to tell: the file written, or the problem)."""
    partial = out.with_name(out.name + ".partial")
    engine = create_database_engine(settings.database_url)
    try:
        await check_database(engine)
        lines = 0
        with partial.open("wb") as file:
            async for line in ExportService(create_session_factory(engine)).bundle(selection):
                file.write(line)
                lines += 1
        os.replace(partial, out)
    except RunNotFound:
        named = selection.run_id if isinstance(selection, RunSelection) else ""
        return FAILED, f"there is no run {named}"
    except (DatabaseUnavailable, StorageUnavailable) as exc:
        return FAILED, str(exc)
    except OSError as exc:
        return FAILED, f"cannot write {out}: {exc.strerror or type(exc).__name__}"
    finally:
        partial.unlink(missing_ok=True)
        await engine.dispose()
    return EXPORTED, f"wrote {out}: {lines} lines"
