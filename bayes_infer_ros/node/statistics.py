"""Rates and durations the node reports in /diagnostics (pure, no rclpy): an arrival-rate meter, bounded
latency samples with percentiles, and the duration series of the tick."""
from __future__ import annotations

import math
from collections import deque
from typing import Any, Optional

import numpy as np


class RateMeter:
    """Arrival rate (Hz) over the last ``window_s`` seconds of a monotonic clock."""

    def __init__(self, window_s: float = 5.0, maxlen: int = 20000):
        self.window_s = float(window_s)
        self._times: deque[float] = deque(maxlen=maxlen)

    def tick(self, now: float) -> None:
        self._times.append(now)

    def rate(self, now: float) -> float:
        while self._times and now - self._times[0] > self.window_s:
            self._times.popleft()
        if not self._times:
            return 0.0
        span = max(now - self._times[0], 1e-9)
        return (len(self._times) - 1) / span if len(self._times) > 1 else 0.0

    def last(self) -> Optional[float]:
        return self._times[-1] if self._times else None


class LatencyStats:
    """Bounded sample of durations (seconds); percentiles in milliseconds."""

    def __init__(self, maxlen: int = 2000):
        self._samples: deque[float] = deque(maxlen=maxlen)
        self.count = 0
        self.maximum = 0.0

    def add(self, seconds: float) -> None:
        self._samples.append(float(seconds))
        self.count += 1
        self.maximum = max(self.maximum, float(seconds))

    def percentile_ms(self, q: float) -> float:
        if not self._samples:
            return math.nan
        return float(np.percentile(np.fromiter(self._samples, dtype=np.float64), q)) * 1e3

    def last_ms(self) -> float:
        return self._samples[-1] * 1e3 if self._samples else math.nan


class TickStatistics:
    """Per tick: its whole duration, the engine call, the policy call (policy inference on), the latency from the
    newest observation's arrival to the publish, and that latency less the engine and policy calls (the node's
    overhead)."""

    def __init__(self) -> None:
        self.ticks = 0
        self.tick = LatencyStats()
        self.inference = LatencyStats()
        self.policy = LatencyStats()
        self.latency = LatencyStats()
        self.overhead = LatencyStats()

    def record(self, tick_s: float, inference_s: float, since_arrival_s: Optional[float],
               policy_s: Optional[float] = None) -> None:
        self.inference.add(inference_s)
        self.tick.add(tick_s)
        if policy_s is not None:
            self.policy.add(policy_s)
        if since_arrival_s is not None:
            self.latency.add(since_arrival_s)
            self.overhead.add(max(since_arrival_s - inference_s - (policy_s or 0.0), 0.0))

    def values(self) -> dict[str, Any]:
        """The diagnostics key/values (milliseconds, three decimals)."""
        return {
            "ticks": self.ticks,
            "tick_duration_ms_median": f"{self.tick.percentile_ms(50):.3f}",
            "tick_duration_ms_p99": f"{self.tick.percentile_ms(99):.3f}",
            "tick_duration_ms_max": f"{self.tick.maximum * 1e3:.3f}",
            "inference_ms_median": f"{self.inference.percentile_ms(50):.3f}",
            **({"policy_ms_median": f"{self.policy.percentile_ms(50):.3f}"} if self.policy.count else {}),
            "latency_ms_median": f"{self.latency.percentile_ms(50):.3f}",
            "latency_ms_p99": f"{self.latency.percentile_ms(99):.3f}",
            "overhead_ms_median": f"{self.overhead.percentile_ms(50):.3f}",
            "overhead_ms_p99": f"{self.overhead.percentile_ms(99):.3f}",
            "overhead_samples": self.overhead.count,
        }
