"""Round-robin timing: the one way this package times candidates against each other.

Used by the autotuner's verify step, the sweep harness and the benchmarks. Candidates run interleaved in one
process (A B C A B C ...), in many short rounds whose order rotates, so load drift and frequency changes hit
every candidate alike; each candidate's statistic is a low percentile of its per-round times, with the spread
recorded next to it.

    timings = time_round_robin({"baseline": lambda: f(x), "fused_dense": lambda: g(x)})
    timings["baseline"].time_s      # 10th percentile of the per-call time over rounds
"""
from __future__ import annotations

import math
import os
import platform
import socket
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import jax
import jaxlib
import numpy as np

#: The statistic every comparison uses: this percentile of a candidate's per-call time over rounds.
PERCENTILE = 10.0


def block(tree: Any) -> Any:
    """Block until every jax array in ``tree`` is computed (lists, tuples, dicts, arrays)."""
    for leaf in jax.tree_util.tree_leaves(tree):
        if hasattr(leaf, "block_until_ready"):
            leaf.block_until_ready()
    return tree


@dataclass(frozen=True)
class CandidateTiming:
    """One candidate's per-call seconds over the rounds of a round-robin.

    time_s:       the PERCENTILE-th percentile over rounds (the statistic candidates are ranked by)
    median_s:     the median over rounds
    p90_s:        the 90th percentile over rounds (spread: ``p90_s / time_s``)
    first_call_s: the first call (trace + compile + one run)
    rounds:       how many rounds were timed
    calls:        calls per round (a round is the mean of that many back-to-back calls)
    samples:      the per-call seconds of each round, in order (round r of every candidate of one round-robin was
                  timed within the same round: comparisons can be paired)
    """

    time_s: float
    median_s: float
    p90_s: float
    first_call_s: float
    rounds: int
    calls: int
    samples: tuple[float, ...] = ()

    @property
    def spread(self) -> float:
        """p90 over the ranking statistic (1.0: no spread)."""
        return self.p90_s / self.time_s if self.time_s > 0 else math.nan


def _calls_per_round(call_s: float, round_target_s: float) -> int:
    return max(1, min(1000, int(round_target_s / max(call_s, 1e-7))))


def time_round_robin(
    candidates: Mapping[str, Callable[[], Any]],
    *,
    rounds: int = 30,
    round_target_s: float = 0.002,
    max_time_s: float = 3.0,
    min_rounds: int = 5,
    warmup: int = 2,
) -> dict[str, CandidateTiming]:
    """Time zero-argument callables round-robin; {name: CandidateTiming}.

    Each candidate is called once (compile), then ``warmup`` times; its calls per round are chosen so one
    round of it lasts about ``round_target_s``. Rounds then visit every candidate in turn (the order rotates
    by one each round) until ``rounds`` rounds are done, or ``max_time_s`` has been spent after at least
    ``min_rounds``. Every call's outputs are blocked on, so asynchronous dispatch is timed to completion.
    """
    if not candidates:
        return {}
    names = list(candidates)
    first: dict[str, float] = {}
    calls: dict[str, int] = {}
    for name in names:
        fn = candidates[name]
        t0 = time.perf_counter()
        block(fn())
        first[name] = time.perf_counter() - t0
        call_s = first[name]
        for _ in range(warmup):
            t0 = time.perf_counter()
            block(fn())
            call_s = time.perf_counter() - t0
        calls[name] = _calls_per_round(call_s, round_target_s)
    samples: dict[str, list[float]] = {n: [] for n in names}
    start = time.perf_counter()
    for r in range(rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            fn, n = candidates[name], calls[name]
            t0 = time.perf_counter()
            for _ in range(n):
                block(fn())
            samples[name].append((time.perf_counter() - t0) / n)
        if r + 1 >= min_rounds and time.perf_counter() - start > max_time_s:
            break
    out = {}
    for name in names:
        xs = np.asarray(samples[name])
        out[name] = CandidateTiming(
            time_s=float(np.percentile(xs, PERCENTILE)), median_s=float(np.median(xs)),
            p90_s=float(np.percentile(xs, 90)), first_call_s=first[name], rounds=len(xs), calls=calls[name],
            samples=tuple(float(x) for x in xs),
        )
    return out


def environment(dtype: str | None = None) -> dict[str, Any]:
    """What every benchmark row records: machine, versions, backend, device, dtype."""
    dev = jax.devices()[0]
    if dtype is None:
        dtype = "float64" if jax.config.jax_enable_x64 else "float32"
    return {
        "machine": socket.gethostname(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "backend": jax.default_backend(),
        "device": getattr(dev, "device_kind", str(dev)),
        "dtype": dtype,
    }


def loadavg() -> float:
    """1-minute load average (NaN where unavailable): a row measured under load is visible as such."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:  # non-POSIX
        return float("nan")
