"""The garbage collector's settings for a process that serves until it exits."""

from __future__ import annotations

import gc

# Net allocations of container objects between two collections of the youngest
# generation; CPython's default is 700 (docs/decisions.md, "The server freezes its
# startup heap").
SERVING_YOUNG_THRESHOLD = 10_000


def tune_for_serving() -> None:
    """Freeze everything alive now (the modules, the contract, the runtime) into the
    collector's permanent generation, and collect the youngest generation less often.

    Without the freeze every full collection walks about 150,000 objects that live
    as long as the process. With CPython's default threshold a loaded server ran a
    young collection every few requests, and the older generations with it: about
    a twentieth of its CPU, and pauses of up to a few milliseconds in the tail.
    Only reference cycles wait longer for collection; everything else is freed
    when its last reference goes, as before. Not for a process that builds apps
    again and again (tests): what a frozen app leaves behind is never collected.
    """
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(SERVING_YOUNG_THRESHOLD, middle, oldest)
