"""Child processes that end with the process that started them, however it ends."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def ended_with_this_process() -> Callable[[], None] | None:
    """On Linux, a `preexec_fn` that has the child sent SIGTERM once the thread that
    started it is gone, however it ended: a benchmark or test run killed with
    SIGKILL leaves no server behind (a ToolLoop server's SQLite writer process
    ends with it, at the end of its input). Start children from the main thread,
    which lives as long as the run."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork, not after
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the request took
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec
