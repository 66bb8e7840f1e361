"""The belief events a series of beliefs should fire, written apart from ``adapters/events.py`` from docs/node.md's
rule, for the tests that check the node's events against pymdp's beliefs."""
from __future__ import annotations

import numpy as np


def expected_events(p: np.ndarray, stamps: np.ndarray, above: float, hysteresis: float = 0.0,
                    min_duration_ns: int = 0) -> list[tuple[bool, int]]:
    """(value, stamp of the tick that crossed) of each change of an ``above`` event over a level's probability ``p``
    (T,) at ``stamps`` (T,) ns: met at ``p > above``, left at ``p <= above - hysteresis``, either holding on every
    tick for ``min_duration_ns`` from the first tick that crossed."""
    value, pending, out = False, None, []
    for prob, stamp in zip(p, stamps):
        crossing = prob <= above - hysteresis if value else prob > above
        if not crossing:
            pending = None
            continue
        pending = stamp if pending is None else pending
        if stamp - pending >= min_duration_ns:
            value = not value
            out.append((value, int(pending)))
            pending = None
    return out
