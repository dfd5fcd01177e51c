"""Opening a contract's remote MCP tools at startup: connect, check the pins, bind.

A remote tool that is missing or changed on its server, or whose server cannot
be reached, stays in the contract but is unavailable: its calls are refused
with a failed receipt and the server is not asked to run it (a server whose
connection was lost is tried again at the next call). Each change of
availability is logged and counted (`app.observability.remote_tools`).
"""

from __future__ import annotations

import logging

from app.contract import Contract
from app.contract.remote import with_targets
from app.engine import Mismatch, RemoteTools
from app.observability.remote_tools import record_status

logger = logging.getLogger("toolloop.remote")


def _on_status(tool_id: str, mismatch: Mismatch | None) -> None:
    if mismatch is None:
        logger.info("remote tool %s is available", tool_id)
        record_status(tool_id, None)
    else:
        logger.warning(
            "remote tool %s is unavailable (%s): %s", tool_id, mismatch.kind.value, mismatch.reason
        )
        record_status(tool_id, mismatch.kind.value)


async def open_remote_tools(
    contract: Contract, max_connections: int
) -> tuple[Contract, RemoteTools]:
    """The contract bound to its remote tools' connections, after a first check."""
    remote = RemoteTools(contract, max_connections=max_connections, on_status=_on_status)
    if not remote:
        return contract, remote
    for tool_id in remote.targets:
        record_status(tool_id, None)
    await remote.check_all()
    return with_targets(contract, remote.targets), remote
