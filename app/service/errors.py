"""Expected failures of the use-cases, each carrying how its caller is answered.

Every class has its HTTP `status`, its problem `type` (RFC 9457) and a fixed
`title`; the API renders every one of them with one handler
(`app.api.problems`). An instance holds the `detail` the caller is told, and
may name `errors` (a pointer into the request and a message each), extension
`members` the client acts on, and `retry_after_s`. `str(error)` is for the log:
it may say more than `detail` (the database's own words, a run id).

ServiceError
 ├── InvalidRequest                422  invalid-request
 │    ├── PlanRejected             422  plan-rejected: preflight found problems; nothing ran
 │    ├── RouterRequestRejected    422  invalid-request: admission found problems; nothing ran
 │    ├── RequestMismatch          422  request-mismatch: a resume's body is not the run's plan
 │    └── IdempotencyKeyReused     422  idempotency-key-reused: the key served another request
 ├── Forbidden                     403  forbidden
 │    ├── CancelForbidden               the caller may see the run but not cancel it
 │    └── ResumeForbidden               the caller may see the run but not resume it
 ├── NotFound                      404  not-found
 │    ├── RunNotFound                   no such run, or not one this viewer may see
 │    └── ConfirmationNotFound          no such run or confirmation (or not this caller's)
 ├── Conflict                      409  conflict
 │    ├── ConfirmationConflict     409  confirmation-conflict: decided already, run not waiting
 │    │    └── ConfirmationContractChanged  409  contract-changed
 │    ├── RunNotCancellable        409  run-not-cancellable
 │    │    ├── RunAlreadyEnded          the run had ended before the cancel took effect
 │    │    └── RunRunningElsewhere      another process executes the run (SQLite)
 │    ├── RunNotResumable          409  run-not-resumable: not an interrupted plan run
 │    ├── ContractChanged          409  contract-changed: admitted against another contract
 │    ├── IdempotencyKeyInUse      409  idempotency-key-in-use: the first request still runs
 │    ├── IdempotencyKeyTaken      409  idempotency-key-in-use: a duplicate claimed it first
 │    └── IdempotencyKeyUnanswered 409  idempotency-key-unanswered: nobody is left to answer
 └── ServiceUnavailable            503  service-unavailable
      ├── RouterUnavailable             prompts or profiles failed to load at startup
      ├── CancelUnconfirmed        503  cancel-unconfirmed: the executing process did not answer
      └── StorageUnavailable       503  storage-unavailable: the database could not do it

The API adds its own leaves for what only HTTP knows (401, 413, 429).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import ClassVar

from app.engine.preflight import PlanProblem

PROBLEM_TYPE = "urn:toolloop:problem:"


@dataclass(frozen=True, slots=True)
class ProblemItem:
    """One problem of a request: where (a JSON Pointer into it) and what."""

    pointer: str
    message: str


class ServiceError(Exception):
    status: ClassVar[int]
    type: ClassVar[str]
    title: ClassVar[str]

    def __init__(
        self,
        detail: str,
        *,
        errors: Sequence[ProblemItem] = (),
        members: Mapping[str, str] | None = None,
        retry_after_s: int | None = None,
        log: str | None = None,
    ) -> None:
        """`log`: what the log says, when it may say more than `detail`."""
        super().__init__(detail if log is None else log)
        self.detail = detail
        self.errors = list(errors)
        self.members = dict(members or {})
        self.retry_after_s = retry_after_s


class InvalidRequest(ServiceError):
    status = 422
    type = PROBLEM_TYPE + "invalid-request"
    title = HTTPStatus.UNPROCESSABLE_ENTITY.phrase


class Forbidden(ServiceError):
    status = 403
    type = PROBLEM_TYPE + "forbidden"
    title = HTTPStatus.FORBIDDEN.phrase


class NotFound(ServiceError):
    status = 404
    type = PROBLEM_TYPE + "not-found"
    title = HTTPStatus.NOT_FOUND.phrase


class Conflict(ServiceError):
    status = 409
    type = PROBLEM_TYPE + "conflict"
    title = HTTPStatus.CONFLICT.phrase


class ServiceUnavailable(ServiceError):
    status = 503
    type = PROBLEM_TYPE + "service-unavailable"
    title = HTTPStatus.SERVICE_UNAVAILABLE.phrase


# -- a request the service refused ---------------------------------------------


def _items(problems: Sequence[PlanProblem]) -> list[ProblemItem]:
    return [ProblemItem(problem.pointer, problem.message) for problem in problems]


class PlanRejected(InvalidRequest):
    type = PROBLEM_TYPE + "plan-rejected"

    def __init__(self, problems: Sequence[PlanProblem]) -> None:
        self.problems = list(problems)
        super().__init__(
            "The plan was rejected; nothing ran.",
            errors=_items(self.problems),
            log=f"the plan has {len(self.problems)} problem(s)",
        )


class RouterRequestRejected(InvalidRequest):
    def __init__(self, problems: Sequence[PlanProblem]) -> None:
        self.problems = list(problems)
        super().__init__(
            "The router request was rejected; nothing ran.",
            errors=_items(self.problems),
            log=f"the router request has {len(self.problems)} problem(s)",
        )


class RequestMismatch(InvalidRequest):
    type = PROBLEM_TYPE + "request-mismatch"

    def __init__(self, run_id: str) -> None:
        super().__init__(
            "The body is not the run's original plan request; send it unchanged.",
            errors=[ProblemItem("", "digest differs from the one stored with the run")],
            log=f"run {run_id}: the body is not its original plan request",
        )


IDEMPOTENCY_KEY_POINTER = "/idempotency-key"


class IdempotencyKeyReused(InvalidRequest):
    type = PROBLEM_TYPE + "idempotency-key-reused"

    def __init__(self, key: str) -> None:
        super().__init__(
            "This Idempotency-Key was already used for a different request.",
            errors=[
                ProblemItem(
                    IDEMPOTENCY_KEY_POINTER, "reused with a different method, path, body or Prefer"
                )
            ],
            log=f"idempotency key {key!r} reused for a different request",
        )


# -- what the caller may not do ----------------------------------------------------


class CancelForbidden(Forbidden):
    def __init__(self, run_id: str) -> None:
        super().__init__("This API key may not cancel this run.", log=f"cancel run {run_id}")


class ResumeForbidden(Forbidden):
    def __init__(self, run_id: str) -> None:
        super().__init__("This API key may not resume this run.", log=f"resume run {run_id}")


# -- what is not there ---------------------------------------------------------------


class RunNotFound(NotFound):
    """No such run, or not one this viewer may see."""

    def __init__(self, run_id: str) -> None:
        super().__init__("There is no run with this id.", log=f"no run {run_id!r}")


class ConfirmationNotFound(NotFound):
    pass


# -- the state does not allow it ------------------------------------------------------


class ConfirmationConflict(Conflict):
    type = PROBLEM_TYPE + "confirmation-conflict"


class ConfirmationContractChanged(ConfirmationConflict):
    type = PROBLEM_TYPE + "contract-changed"


class RunNotCancellable(Conflict):
    type = PROBLEM_TYPE + "run-not-cancellable"


class RunAlreadyEnded(RunNotCancellable):
    def __init__(self, run_id: str, status: str) -> None:
        super().__init__(
            f"The run already ended: {status}.", log=f"run {run_id} already ended: {status}"
        )
        self.run_status = status


class RunRunningElsewhere(RunNotCancellable):
    """Another process executes the run and no channel reaches it (SQLite)."""

    def __init__(self, run_id: str) -> None:
        super().__init__(
            "The run executes in another service instance; only that instance can cancel it.",
            log=f"run {run_id} executes in another instance",
        )


class RunNotResumable(Conflict):
    type = PROBLEM_TYPE + "run-not-resumable"

    def __init__(self, run_id: str, reason: str) -> None:
        super().__init__(
            f"The run cannot be resumed: {reason}.",
            log=f"run {run_id} cannot be resumed: {reason}",
        )
        self.reason = reason


class ContractChanged(Conflict):
    type = PROBLEM_TYPE + "contract-changed"

    def __init__(self, change: str) -> None:
        super().__init__(f"The contract changed: {change}.", log=change)


class IdempotencyKeyInUse(Conflict):
    type = PROBLEM_TYPE + "idempotency-key-in-use"
    # The first request's answer is usually stored within a second.
    RETRY_AFTER_S = 1

    def __init__(self, run_id: str | None) -> None:
        running = "" if run_id is None else f" (run {run_id})"
        super().__init__(
            f"The first request with this Idempotency-Key is still in progress{running}.",
            retry_after_s=self.RETRY_AFTER_S,
        )
        self.run_id = run_id


class IdempotencyKeyTaken(Conflict):
    """A concurrent duplicate claimed the key first: the caller looks it up again."""

    type = IdempotencyKeyInUse.type

    def __init__(self, key: str) -> None:
        super().__init__(
            "A concurrent request with this Idempotency-Key is in progress.",
            retry_after_s=IdempotencyKeyInUse.RETRY_AFTER_S,
            log=f"idempotency key {key!r} claimed concurrently",
        )


class IdempotencyKeyUnanswered(Conflict):
    """No Retry-After: no retry of this key will ever be answered."""

    type = PROBLEM_TYPE + "idempotency-key-unanswered"

    def __init__(self, run_id: str, run_status: str) -> None:
        super().__init__(
            f"The first request with this Idempotency-Key started run {run_id}, which "
            f"stopped ({run_status}) before its response was stored, and no retry "
            f"will be answered. GET /runs/{run_id} shows the run and its receipts; "
            f"an interrupted plan resumes with POST /runs/{run_id}/resume and the "
            "original body.",
            members={"run_id": run_id, "run_status": run_status},
            log=f"the first request with this key stopped ({run_status}) before it was answered",
        )
        self.run_id = run_id
        self.run_status = run_status


# -- what is away --------------------------------------------------------------------

ROUTER_UNAVAILABLE = (
    "The router is unavailable: it failed closed at startup (the service log says why)."
)
DATABASE_UNAVAILABLE = "The database is unavailable; retry later."
EXECUTOR_UNAVAILABLE = "The executor is unavailable; retry later."


class RouterUnavailable(ServiceUnavailable):
    """Its problems name files and keys of the server's configuration: the log's to say."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__(
            ROUTER_UNAVAILABLE,
            retry_after_s=60,
            log="the router failed closed at startup: " + "; ".join(self.problems),
        )


class CancelUnconfirmed(ServiceUnavailable):
    type = PROBLEM_TYPE + "cancel-unconfirmed"

    def __init__(self, run_id: str, wait_s: float) -> None:
        super().__init__(
            f"The service instance executing the run did not confirm the cancel within "
            f"{wait_s:g}s; the cancel may still take effect. Send it again to learn the outcome.",
            retry_after_s=1,
            log=f"run {run_id}: the executing instance did not confirm the cancel",
        )


class StorageUnavailable(ServiceUnavailable):
    """The cause (driver text, SQL, where the database lives) goes to the log only."""

    type = PROBLEM_TYPE + "storage-unavailable"

    def __init__(self, cause: str) -> None:
        super().__init__(DATABASE_UNAVAILABLE, retry_after_s=5, log=cause)
