"""Use-cases for router runs: admit and record a run, pause it for a confirmation,
resume it once every pending call is decided (the decisions themselves go
through `app.service.confirmations`, shared with plan runs), and cancel one
that waits.

Every stretch of a run executes under the run supervisor (`runs.tasks`) as a
`RouterTask` the API launches: the first from `open_run`, each resume from
`decide`. A paused run is only rows (`pending`), so it survives restarts, and
any process can decide or cancel it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NoReturn

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.contract import Contract
from app.engine import PlanProblem, RunIdentity
from app.foundation.canonical import canonical_json, sha256_digest
from app.foundation.ids import new_run_id
from app.llm.profiles import Profiles
from app.llm.replay import ReplayModel
from app.observability.context import bind_run
from app.observability.router import ChatModel
from app.router.limits import RouterLimits
from app.router.loop import RouterRun
from app.router.pause import Checkpoint, Decision
from app.router.ports import RouterKit
from app.router.request import RouterRequest
from app.router.request_checks import RunPlan, admit
from app.router.setup import RouterSetup
from app.service.errors import RouterRequestRejected, RouterUnavailable, StorageUnavailable
from app.service.idempotency import IdempotencyClaim
from app.service.rejection_audit import RejectionAudit, rejection_detail
from app.service.router.cassette import Recording
from app.service.router.executor import RouterExecutor
from app.service.router.records import AuditDecisions, closed_outcome
from app.service.router.replay import (
    CapturedDecisions,
    Replay,
    ReplaySourceError,
    recording_for,
    recording_from,
    replay_profile,
    replayed_request,
)
from app.service.router.tasks import RouterTask
from app.service.runs.records import record_run_start
from app.service.runs.tasks import CANCELLED, SupervisedRun
from app.service.usage.ledger import ReplayedUsage
from app.store.journal.writer import GroupCommitWriter
from app.store.models import Run
from app.store.repositories.router_runs import PENDING, RouterRunRepository
from app.store.repositories.runs import RunRepository

# The profile name a replay started from the command line gives both its models.
REPLAY_PROFILE = "replay"


def as_is(model: ChatModel) -> ChatModel:
    return model


@dataclass(frozen=True, slots=True)
class _Resume:
    checkpoint: dict[str, Any]
    decisions: dict[str, Decision]
    caller: str | None
    # The outcome stored when the run paused.
    outcome: dict[str, Any] | None


@dataclass
class RouterService:
    """`kit` is None when the router failed closed at startup (`setup.problems` say why)."""

    contract: Contract
    sessions: async_sessionmaker[AsyncSession]
    writer: GroupCommitWriter
    instance_id: str
    limits: RouterLimits
    setup: RouterSetup
    kit: RouterKit | None
    # What a replay runs with: built whenever the prompts loaded (a replay needs no profile).
    replay_kit: RouterKit | None = None
    # What every model request goes through (a trace's span), replayed ones too.
    wrap_model: Callable[[ChatModel], ChatModel] = as_is
    # Where runs go when not in this process (Temporal's executor); replays stay here.
    executor: RouterExecutor | None = None
    # Rows for rejected requests: sanitized, bounded per caller (`rejection_audit`).
    rejections: RejectionAudit = field(init=False)

    def __post_init__(self) -> None:
        self.rejections = RejectionAudit(self.writer.emit_row, "router.rejected")

    def require_ready(self) -> RouterKit:
        if self.kit is None or self.setup.profiles is None:
            raise RouterUnavailable(self.setup.problems)
        return self.kit

    async def open_run(
        self,
        request: RouterRequest,
        caller: str | None,
        *,
        request_digest: str,
        claim: IdempotencyClaim | None = None,
    ) -> SupervisedRun:
        """Admit, then record the run (and claim `claim`); it runs under the supervisor.

        Raises RouterUnavailable, RouterRequestRejected (nothing recorded but the
        audit event), IdempotencyKeyTaken, StorageUnavailable.
        """
        kit = self.require_ready()
        assert self.setup.profiles is not None
        problems, plan = admit(request, self.contract, self.setup.profiles, self.limits)
        if plan is None:
            self._reject(request.owner, caller, problems)
        recording = None
        if plan.router_profile.replays or plan.final_profile.replays:
            recording = await self._recording_of(plan, caller)
        elif self.executor is not None:
            problems = self.executor.problems(plan)
            if problems:
                self._reject(request.owner, caller, problems)
        return await self._start(kit, plan, caller, request_digest, claim, recording)

    async def open_replay(self, source: str | Path, caller: str | None) -> SupervisedRun:
        """Replay a recorded run (its id) or a cassette file with its own request.

        Raises RouterUnavailable (no prompts), ReplaySourceError, RouterRequestRejected
        (the recorded request does not pass today's admission), StorageUnavailable.
        """
        kit = self.replay_kit
        if kit is None:
            raise RouterUnavailable(self.setup.problems)
        recording = await recording_from(source, self.sessions)
        profile = replay_profile(REPLAY_PROFILE, recording.source)
        data = replayed_request(recording, profile.name)
        request = RouterRequest.from_json(data)
        profiles = Profiles({**(self.setup.profiles or {}), profile.name: profile})
        problems, plan = admit(request, self.contract, profiles, self.limits)
        if plan is None:
            self._reject(request.owner, caller, problems)
        digest = sha256_digest(canonical_json(data))
        return await self._start(kit, plan, caller, digest, None, recording)

    async def _recording_of(self, plan: RunPlan, caller: str | None) -> Recording:
        owner = plan.owner.name
        profile = plan.router_profile
        if not profile.replays or plan.final_profile.name != profile.name:
            pointer = "/final_profile" if profile.replays else "/router_profile"
            message = (
                "a replay serves both models: router_profile and final_profile name "
                "the same replay profile"
            )
            self._reject(owner, caller, [PlanProblem(pointer, message)])
        try:
            return await recording_for(profile, self.sessions)
        except ReplaySourceError as exc:
            self._reject(
                owner,
                caller,
                [PlanProblem("/router_profile", f"model profile {profile.name!r}: {exc}")],
            )

    async def _start(
        self,
        kit: RouterKit,
        plan: RunPlan,
        caller: str | None,
        request_digest: str,
        claim: IdempotencyClaim | None,
        recording: Recording | None,
    ) -> SupervisedRun:
        request = plan.request
        run_id = new_run_id()
        executor = None if recording is not None else self.executor
        await record_run_start(
            self.sessions,
            run_id=run_id,
            kind="router",
            owner=plan.owner.name,
            contract_hash=self.contract.hash,
            instance_id=self.instance_id
            if executor is None
            else executor.run_instance(self.instance_id),
            caller=caller,
            claim=claim,
            request_digest=request_digest,
        )
        bind_run(run_id, caller)
        identity = RunIdentity(run_id, plan.owner.name, caller, request.context, self.contract.hash)
        if executor is not None:
            return executor.router_run(self.sessions, plan, identity)
        sink = AuditDecisions(self.writer, run_id, caller)
        if recording is None:
            run = RouterRun.new(kit, plan, identity, sink)
            return RouterTask.started(self.sessions, self.writer, run)
        model = ReplayModel(recording.entries)
        replay = Replay(recording, model, CapturedDecisions(sink), self.contract.hash)
        replaying = replace(kit, llm=self.wrap_model(model), ledger=ReplayedUsage())
        run = RouterRun.new(replaying, plan, identity, replay.decisions)
        return RouterTask.started(self.sessions, self.writer, run, review=replay.review())

    async def cancel_paused(self, run_id: str, cancelled_by: str | None) -> str | None:
        """End a run that waits for confirmation `cancelled`: its waiting calls are
        refused and their kept arguments dropped. None when the run is not waiting."""
        reason = "the run was cancelled while it waited for confirmation"
        try:
            async with self.sessions.begin() as session:
                repo = RouterRunRepository(session)
                run = await repo.lock_run(run_id)
                if run is None or run.kind != "router" or run.status != PENDING:
                    return None
                refused = await self.close_paused(
                    session, run, reason, cancelled_by, status=CANCELLED, stopped_by=CANCELLED
                )
                if refused is None:
                    return None
        except SQLAlchemyError as exc:
            raise StorageUnavailable(f"the cancel could not be recorded: {exc}") from exc
        sink = AuditDecisions(self.writer, run_id, cancelled_by)
        for confirmation_id, tool, call_key in refused:
            sink.record(
                "router.confirmation_decided",
                {"confirmation_id": confirmation_id, "decision": "refused", "reason": reason},
                tool=tool,
                call_key=call_key,
            )
        sink.record("router.run_stopped", {"status": CANCELLED, "was": PENDING})
        self.writer.run_ended(run_id)
        await self.closed_while_waiting(run_id)
        return CANCELLED

    async def closed_while_waiting(self, run_id: str) -> None:
        """A run closed while it waited for confirmations: the executor running it (not
        this process) is told."""
        if self.executor is not None:
            await self.executor.stop_waiting(run_id)

    # -- internals ------------------------------------------------------------

    def _reject(self, owner: str, caller: str | None, problems: list[PlanProblem]) -> NoReturn:
        self.rejections.record(caller, rejection_detail(owner, self.contract.owners, problems))
        raise RouterRequestRejected(problems)

    def close(self) -> None:
        """Write what the rejection audit still holds (the service is closing)."""
        self.rejections.close()

    async def claim_resume(self, repo: RouterRunRepository, run: Run) -> SupervisedRun | None:
        """Once no call waits any more: the run, moved to `running` here, going on; None
        otherwise. An executor's run reads the decisions from the store itself; a local
        one is given them, and the kept arguments are dropped here."""
        run_id = run.id
        instance = (
            self.instance_id
            if self.executor is None
            else self.executor.run_instance(self.instance_id)
        )
        if await repo.count_pending(run_id) or not await repo.claim(run_id, instance):
            return None
        if self.executor is not None:
            return self.executor.resumed_run(self.sessions, run_id)
        checkpoint = await repo.checkpoint(run_id)
        decisions = {
            c.id: Decision(c.id, c.status == "approved", c.reason or "", c.args)
            for c in await repo.confirmations(run_id)
        }
        await repo.release(run_id)
        return self._resumed(run_id, _Resume(checkpoint or {}, decisions, run.caller, run.outcome))

    async def close_paused(
        self,
        session: AsyncSession,
        run: Run,
        reason: str,
        decided_by: str | None,
        *,
        status: str = "incomplete",
        stopped_by: str = "confirmation",
    ) -> list[tuple[str, str, str]] | None:
        """Refuse every waiting call, drop the kept arguments and end the paused run.

        The refused calls' (confirmation id, tool, call key); None when another
        process moved the run out of `pending` first.
        """
        repo = RouterRunRepository(session)
        # pending -> running here first: of concurrent deciders and cancellers, one wins.
        if not await repo.claim(run.id, self.instance_id):
            return None
        refused = []
        for confirmation in await repo.confirmations(run.id):
            if await repo.decide(
                confirmation.id, status="refused", reason=reason, decided_by=decided_by
            ):
                refused.append((confirmation.id, confirmation.tool, confirmation.call_key))
        outcome = closed_outcome(run.outcome, reason, status=status, stopped_by=stopped_by)
        await RunRepository(session).finish(run.id, status=status, outcome=outcome)
        await repo.release(run.id)
        return refused

    def _resumed(self, run_id: str, resume: _Resume) -> RouterTask:
        sink = AuditDecisions(self.writer, run_id, resume.caller)

        def prepare() -> RouterRun | str:
            kit = self.require_ready()
            assert self.setup.profiles is not None
            checkpoint = Checkpoint.from_json(resume.checkpoint)
            request = RouterRequest.from_json(checkpoint.request)
            problems, plan = admit(
                request, self.contract, self.setup.profiles, self.limits, resuming=True
            )
            if plan is None:
                reason = "the run cannot resume: " + "; ".join(
                    f"{p.pointer}: {p.message}" for p in problems
                )
                sink.record("router.resume_failed", {"reason": reason})
                return reason
            if plan.router_profile.replays:
                reason = "a replay does not resume: its recording is served once; replay it again"
                sink.record("router.resume_failed", {"reason": reason})
                return reason
            identity = RunIdentity(
                run_id, plan.owner.name, resume.caller, request.context, self.contract.hash
            )
            return RouterRun.restore(kit, plan, identity, sink, checkpoint)

        return RouterTask(
            self.sessions, self.writer, run_id, sink, prepare, resume.decisions, resume.outcome
        )
