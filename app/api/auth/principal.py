"""Who is calling: an API key's name and scopes, or the open-mode caller.

`admin` implies every scope and `runs:read:all` implies `runs:read`, so a
route guarded by `runs:read` also admits operators; what they may then *see*
is decided by `can_see_run` / `visible_run_creator`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

PLANS_EXECUTE = "plans:execute"
ROUTER_RUN = "router:run"
RUNS_READ = "runs:read"
RUNS_READ_ALL = "runs:read:all"
METRICS_READ = "metrics:read"
CONFIRMATIONS_DECIDE = "confirmations:decide"
ADMIN = "admin"

SCOPES: frozenset[str] = frozenset(
    {PLANS_EXECUTE, ROUTER_RUN, RUNS_READ, RUNS_READ_ALL, METRICS_READ, CONFIRMATIONS_DECIDE, ADMIN}
)
_IMPLIED: dict[str, frozenset[str]] = {
    ADMIN: SCOPES,
    RUNS_READ_ALL: frozenset({RUNS_READ}),
}


@lru_cache(maxsize=256)  # one entry per set of scopes a key file declares
def _granted(scopes: frozenset[str]) -> frozenset[str]:
    """The scopes held, with the ones they imply."""
    return scopes.union(*(_IMPLIED.get(scope, ()) for scope in scopes))


@dataclass(frozen=True, slots=True)
class Principal:
    """`name` is the key's name, recorded on runs, audit events and logs; None in open mode."""

    name: str | None
    scopes: frozenset[str]

    def has(self, scope: str) -> bool:
        return scope in _granted(self.scopes)

    @property
    def can_read_all_runs(self) -> bool:
        return self.has(RUNS_READ_ALL)

    def can_see_run(self, created_by: str | None) -> bool:
        """False means the run does not exist for this caller: answer 404, not 403."""
        if self.can_read_all_runs:
            return True
        return self.name is not None and self.has(RUNS_READ) and created_by == self.name

    @property
    def sees_every_confirmation(self) -> bool:
        """A decider sees every waiting call, as operators do."""
        return self.can_read_all_runs or self.has(CONFIRMATIONS_DECIDE)

    @property
    def visible_run_creator(self) -> str | None:
        """The `created_by` a run listing must filter on; None means every run."""
        if self.can_read_all_runs:
            return None
        if self.name is None or not self.has(RUNS_READ):
            raise RuntimeError("a route listing runs must require the runs:read scope")
        return self.name


OPEN = Principal(name=None, scopes=SCOPES)
"""The caller when no keys file is configured (loopback only)."""
