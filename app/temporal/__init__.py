"""Plans on Temporal: each plan a workflow, each call an activity of a `toolloop worker`.

Imported only when `TOOLLOOP_EXECUTOR=temporal` (and by `toolloop worker`): the
local executor never loads the SDK. It sits at the top with `app.api`: it
implements the service's executor port (`client.TemporalExecutor`) and runs the
engine's call pipeline inside workers (`activities`), wired by the composition
roots (`app.api.app`, `app.cli`).
"""
