"""Tools' admission limits shared by every process on one PostgreSQL database."""

from app.store.shared_limits.postgres import PostgresSharedLimits

__all__ = ["PostgresSharedLimits"]
