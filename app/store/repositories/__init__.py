"""Repositories: all SQL lives here. Each is built from the caller's AsyncSession."""

from app.store.repositories.audit import AuditRepository
from app.store.repositories.cache import CacheRepository
from app.store.repositories.contract_snapshots import ContractSnapshotRepository
from app.store.repositories.idempotency import IdempotencyRepository
from app.store.repositories.instances import InstanceRepository
from app.store.repositories.pagination import Keyset, Page
from app.store.repositories.receipts import ReceiptRepository
from app.store.repositories.runs import RunRepository

__all__ = [
    "AuditRepository",
    "CacheRepository",
    "ContractSnapshotRepository",
    "IdempotencyRepository",
    "InstanceRepository",
    "Keyset",
    "Page",
    "ReceiptRepository",
    "RunRepository",
]
