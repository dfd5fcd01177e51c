"""The engine: runs registered callables under the contract's rules.

What the layers above use is exported here: the plans they hand in and the
preflight that checks them, the engine and its call pipeline, the run's
identity and resume point, receipts, confirmations, the ports they implement,
and the remote tools opened at startup. Tools themselves see only
`ExecutionContext` and `current_call`.
"""

from app.engine.confirmation import CallPlace, ConfirmationDecision, WaitingCall
from app.engine.context import ExecutionContext, current_call
from app.engine.engine import Engine
from app.engine.errors import CallRejected, DispatchRejected, NoCurrentCall, ReceiptWriteFailed
from app.engine.parallel import ParallelOutcome
from app.engine.pipeline import CallPipeline
from app.engine.plan import Lane, ParallelPlan, PlanLimits, PlannedCall, SequentialPlan
from app.engine.ports import AuditEvent, AuditKind, CachedOutput
from app.engine.preflight import PlanProblem, preflight_parallel, preflight_sequential
from app.engine.readable_preflight import (
    ReadableCall,
    ReadableChain,
    ReadablePlan,
    readable_problems,
)
from app.engine.receipt import CallError, ErrorKind, Receipt, Status
from app.engine.remote.pins import Mismatch
from app.engine.remote.tools import RemoteTools
from app.engine.resume import ResumePoint
from app.engine.run import RunIdentity
from app.engine.sequential import SequentialOutcome
from app.engine.settled import Settled

__all__ = [
    "AuditEvent",
    "AuditKind",
    "CachedOutput",
    "CallError",
    "CallPipeline",
    "CallPlace",
    "CallRejected",
    "ConfirmationDecision",
    "DispatchRejected",
    "Engine",
    "ErrorKind",
    "ExecutionContext",
    "Lane",
    "Mismatch",
    "NoCurrentCall",
    "ParallelOutcome",
    "ParallelPlan",
    "PlanLimits",
    "PlanProblem",
    "PlannedCall",
    "ReadableCall",
    "ReadableChain",
    "ReadablePlan",
    "Receipt",
    "ReceiptWriteFailed",
    "RemoteTools",
    "ResumePoint",
    "RunIdentity",
    "SequentialOutcome",
    "SequentialPlan",
    "Settled",
    "Status",
    "WaitingCall",
    "current_call",
    "preflight_parallel",
    "preflight_sequential",
    "readable_problems",
]
