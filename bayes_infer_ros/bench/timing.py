"""Timing utilities shared by the harness, the variants benchmark and the autotuner's verify step.

Rules every measurement here follows (house style): warm up, ``block_until_ready`` on every output,
report compile time apart from the steady-state median, and record the environment with every row.
"""
from __future__ import annotations

import os
import platform
import socket
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional


def block(tree: Any) -> Any:
    """Block until every jax array in ``tree`` is computed (works on lists, tuples, dicts, arrays)."""
    import jax

    for leaf in jax.tree_util.tree_leaves(tree):
        if hasattr(leaf, "block_until_ready"):
            leaf.block_until_ready()
    return tree


@dataclass(frozen=True)
class Timing:
    """One timed callable.

    first_call_s: the first call (trace + compile + one run)
    compile_s:    first_call_s minus the steady-state median (what the first call costs beyond a run)
    median_s:     steady-state median over ``repeats`` calls after warm-up
    p10_s/p90_s:  spread of the steady-state calls
    repeats:      how many steady-state calls were timed
    """

    first_call_s: float
    compile_s: float
    median_s: float
    p10_s: float
    p90_s: float
    repeats: int


def _quantile(sorted_xs: list[float], q: float) -> float:
    if len(sorted_xs) == 1:
        return sorted_xs[0]
    pos = q * (len(sorted_xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def time_callable(
    fn: Callable[..., Any],
    *args: Any,
    warmup: int = 2,
    min_repeats: int = 5,
    max_repeats: int = 200,
    min_time_s: float = 0.2,
    max_time_s: float = 5.0,
    **kwargs: Any,
) -> Timing:
    """Time ``fn(*args, **kwargs)``: one first call, ``warmup`` untimed calls, then repeats.

    Repeats continue until both ``min_repeats`` calls and ``min_time_s`` seconds have been spent, and stop at
    ``max_repeats`` calls or ``max_time_s`` seconds (whichever first), so a slow case cannot run away. A call
    slower than ``max_time_s / 3`` ends the warm-up early (its cost is known; more warm-up buys nothing) and
    such a case gets 3 timed calls (1 when a call takes longer than ``max_time_s``).
    """
    t0 = time.perf_counter()
    block(fn(*args, **kwargs))
    first = time.perf_counter() - t0
    for _ in range(warmup):
        t0 = time.perf_counter()
        block(fn(*args, **kwargs))
        call_s = time.perf_counter() - t0
        if call_s > max_time_s / 3:
            min_repeats = min(min_repeats, 3 if call_s < max_time_s else 1)
            break
    samples: list[float] = []
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        block(fn(*args, **kwargs))
        samples.append(time.perf_counter() - t0)
        spent = time.perf_counter() - start
        if len(samples) >= max_repeats or (spent >= max_time_s and len(samples) >= min_repeats):
            break
        if len(samples) >= min_repeats and spent >= min_time_s:
            break
    samples.sort()
    median = statistics.median(samples)
    return Timing(
        first_call_s=first,
        compile_s=max(first - median, 0.0),
        median_s=median,
        p10_s=_quantile(samples, 0.1),
        p90_s=_quantile(samples, 0.9),
        repeats=len(samples),
    )


def environment(dtype: Optional[str] = None) -> dict[str, Any]:
    """What every benchmark row records: machine, versions, backend, device, dtype."""
    import jax
    import jaxlib

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
    except OSError:  # pragma: no cover - non-POSIX
        return float("nan")
