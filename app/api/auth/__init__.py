"""API keys, scopes and the request dependencies that enforce them."""

from app.api.auth.dependencies import (
    AdminCaller,
    Caller,
    MetricsReader,
    PlansCaller,
    RouterCaller,
    RunController,
    RunsReader,
    authenticated,
    install_auth,
    require_any_scope,
    require_scope,
)
from app.api.auth.keyring import KeyEntry, KeyRing
from app.api.auth.keys_file import (
    KeyRequestError,
    KeysError,
    KeysFileError,
    create_key,
    load_keys,
)
from app.api.auth.loopback import UnsafeBindError, check_open_bind, is_loopback_host
from app.api.auth.principal import (
    ADMIN,
    METRICS_READ,
    OPEN,
    PLANS_EXECUTE,
    ROUTER_RUN,
    RUNS_READ,
    RUNS_READ_ALL,
    SCOPES,
    Principal,
)
from app.api.auth.throttle import FailedAuthThrottle

__all__ = [
    "ADMIN",
    "METRICS_READ",
    "OPEN",
    "PLANS_EXECUTE",
    "ROUTER_RUN",
    "RUNS_READ",
    "RUNS_READ_ALL",
    "SCOPES",
    "AdminCaller",
    "Caller",
    "FailedAuthThrottle",
    "KeyEntry",
    "KeyRequestError",
    "KeyRing",
    "KeysError",
    "KeysFileError",
    "MetricsReader",
    "PlansCaller",
    "Principal",
    "RouterCaller",
    "RunController",
    "RunsReader",
    "UnsafeBindError",
    "authenticated",
    "check_open_bind",
    "create_key",
    "install_auth",
    "is_loopback_host",
    "load_keys",
    "require_any_scope",
    "require_scope",
]
