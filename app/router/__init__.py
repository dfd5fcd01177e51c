"""The dynamic router: decision contract, prompt assembly, LLM decisions,
observation summaries, guardrails, completion gate and closeout.

The router decides; the engine executes. Nothing here runs a tool.
"""

from app.router.limits import RouterLimits
from app.router.loop import Finished, Paused, RouterRun, RunResult
from app.router.outcome import Outcome, RunStatus, Stop
from app.router.pause import Checkpoint, Decision, PendingCall
from app.router.ports import DecisionSink, RouterKit
from app.router.prompts import PromptError, PromptSet, load_prompts
from app.router.request import Budgets, CompletionRequest, RouterRequest, Step
from app.router.request_checks import RunPlan, admit

__all__ = [
    "Budgets",
    "Checkpoint",
    "CompletionRequest",
    "Decision",
    "DecisionSink",
    "Finished",
    "Outcome",
    "Paused",
    "PendingCall",
    "PromptError",
    "PromptSet",
    "RouterKit",
    "RouterLimits",
    "RouterRequest",
    "RouterRun",
    "RunPlan",
    "RunResult",
    "RunStatus",
    "Step",
    "Stop",
    "admit",
    "load_prompts",
]
