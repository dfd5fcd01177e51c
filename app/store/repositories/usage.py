"""The usage ledger: one row per model request, summed in hour or day buckets.

Buckets are listed newest first, then by owner, caller and profile; a page
ends after `(bucket, owner, caller, profile)`, which is unique per bucket.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import ColumnElement, Select, and_, func, insert, or_, select, tuple_

from app.store.models import ModelUsage
from app.store.repositories.base import Repository

Bucket = Literal["hour", "day"]


@dataclass(frozen=True, slots=True)
class UsagePosition:
    bucket: datetime
    owner: str
    caller: str
    profile: str


@dataclass(frozen=True, slots=True)
class UsageSum:
    bucket: datetime
    owner: str
    caller: str
    profile: str
    requests: int
    input_tokens: int
    output_tokens: int
    cost_nanos: int | None

    @property
    def position(self) -> UsagePosition:
        return UsagePosition(self.bucket, self.owner, self.caller, self.profile)


@dataclass(frozen=True, slots=True)
class UsageFilters:
    owner: str | None = None
    caller: str | None = None
    profile: str | None = None
    since: datetime | None = None
    until: datetime | None = None


@dataclass(frozen=True, slots=True)
class RunUsage:
    """A run's model requests and what they spent, all told."""

    requests: int
    input_tokens: int
    output_tokens: int
    cost_nanos: int | None


def run_totals_statement(run_id: str) -> Select[int, int, int, int | None]:
    """A run's requests, tokens and cost, read by the ledger's `run_id` index."""
    return select(
        func.count(),
        func.coalesce(func.sum(ModelUsage.input_tokens), 0),
        func.coalesce(func.sum(ModelUsage.output_tokens), 0),
        func.sum(ModelUsage.cost_nanos),
    ).where(ModelUsage.run_id == run_id)


class UsageRepository(Repository):
    async def add(self, row: Mapping[str, Any]) -> None:
        """One request's row; keys are `ModelUsage` column names (no id)."""
        await self.session.execute(insert(ModelUsage), [dict(row)])

    async def run_totals(self, run_id: str) -> RunUsage:
        statement = run_totals_statement(run_id)
        requests, input_tokens, output_tokens, cost = (await self.session.execute(statement)).one()
        return RunUsage(
            int(requests),
            int(input_tokens),
            int(output_tokens),
            None if cost is None else int(cost),
        )

    async def sums(
        self,
        bucket: Bucket,
        filters: UsageFilters,
        *,
        limit: int,
        after: UsagePosition | None,
    ) -> tuple[list[UsageSum], UsagePosition | None]:
        """A page of sums (one row more is read to know whether another page follows)."""
        start = ModelUsage.hour if bucket == "hour" else ModelUsage.day
        keys = (start, ModelUsage.owner, ModelUsage.caller, ModelUsage.profile)
        statement = select(
            *keys,
            func.count(),
            func.sum(ModelUsage.input_tokens),
            func.sum(ModelUsage.output_tokens),
            func.sum(ModelUsage.cost_nanos),
        )
        for column, wanted in (
            (ModelUsage.owner, filters.owner),
            (ModelUsage.caller, filters.caller),
            (ModelUsage.profile, filters.profile),
        ):
            if wanted is not None:
                statement = statement.where(column == wanted)
        if filters.since is not None:
            statement = statement.where(ModelUsage.at >= filters.since)
        if filters.until is not None:
            statement = statement.where(ModelUsage.at < filters.until)
        if after is not None:
            statement = statement.where(_after(keys, after))
        statement = (
            statement.group_by(*keys)
            .order_by(start.desc(), ModelUsage.owner, ModelUsage.caller, ModelUsage.profile)
            .limit(limit + 1)
        )
        rows = (await self.session.execute(statement)).all()
        sums = [
            UsageSum(
                bucket=row[0],
                owner=row[1],
                caller=row[2],
                profile=row[3],
                requests=int(row[4]),
                input_tokens=int(row[5]),
                output_tokens=int(row[6]),
                cost_nanos=None if row[7] is None else int(row[7]),
            )
            for row in rows[:limit]
        ]
        return sums, (sums[-1].position if len(rows) > limit else None)


def _after(keys: tuple[Any, ...], after: UsagePosition) -> ColumnElement[bool]:
    start, owner, caller, profile = keys
    return or_(
        start < after.bucket,
        and_(
            start == after.bucket,
            tuple_(owner, caller, profile) > tuple_(after.owner, after.caller, after.profile),
        ),
    )
