"""Plans and router runs on Temporal: each run a workflow, run by `toolloop worker`s.

A plan's calls are one activity each (`workflows`, `activities`); a router run's
stretches of the router's own loop are one activity each (`router_workflow`,
`router_activities`, `router_client`).

Imported only when `TOOLLOOP_EXECUTOR=temporal` (and by `toolloop worker`): the
local executor never loads the SDK. It sits at the top with `app.api`: it
implements the service's executor port (`client.TemporalExecutor`) and runs the
engine's call pipeline inside workers (`activities`), wired by the composition
roots (`app.api.app`, `app.cli`).
"""
