"""Pure helpers of the node (numpy only, no rclpy): message fields <-> arrays, input checks, the VMP/MMP
window, rates and latency statistics. Tested without a ROS graph (test/ros/test_conversion.py).

Shapes: ``m`` = levels of one modality, ``O = sum m_i`` (packed observations), ``F`` = factors,
``T`` = the fixed VMP/MMP window (``horizon``).
"""
from __future__ import annotations

import difflib
import math
from collections import deque
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

import numpy as np

# Every reason an input can be refused for; each has a counter in /diagnostics ("rejected.<reason>").
REJECT_REASONS = (
    "wrong_length",        # probabilities has the wrong number of entries for the modality
    "non_finite",          # NaN or inf in probabilities
    "negative",            # a negative probability
    "all_zero",            # probabilities sum to 0: no distribution
    "level_out_of_range",  # level < -1 or level >= m
    "out_of_order",        # header stamp older than the last accepted one of the same topic
    "stale",               # older than observation_timeout when it arrived
    "future",              # stamped more than max_future_stamp ahead of the node clock (admission.py)
    "bad_stamp",           # negative sec or nanosec >= 10^9: not a time (admission.py)
    "bad_control",         # Controls message with the wrong length, an index out of range or a wrong label
)

# Probabilities whose sum is off by more than this are renormalised *and* counted ("renormalized").
RENORMALIZE_ATOL = 1e-3


@dataclass(frozen=True)
class ObservationCheck:
    """Outcome of :func:`observation_to_distribution`: ``distribution`` (m,) float32, or a ``reason``."""

    distribution: Optional[np.ndarray]
    reason: Optional[str] = None
    detail: str = ""
    renormalized: bool = False

    @property
    def ok(self) -> bool:
        return self.distribution is not None


def one_hot(level: int, num_levels: int) -> np.ndarray:
    out = np.zeros(num_levels, dtype=np.float32)
    out[level] = 1.0
    return out


def uniform(num_levels: int) -> np.ndarray:
    """The uninformative observation: A^T u is constant over states, so it adds no evidence."""
    return np.full(num_levels, 1.0 / num_levels, dtype=np.float32)


def observation_to_distribution(level: int, probabilities: Sequence[float], num_levels: int) -> ObservationCheck:
    """A CategoricalObservation's fields -> a distribution over the modality's ``num_levels`` levels.

    ``level >= 0`` is a one-hot observation (``probabilities`` is then ignored); ``level == -1`` uses
    ``probabilities``, which must have ``num_levels`` finite, non-negative entries with a positive sum;
    a sum off 1 by more than RENORMALIZE_ATOL is renormalised and flagged. Never raises.
    """
    level = int(level)
    if level >= 0:
        if level >= num_levels:
            return ObservationCheck(None, "level_out_of_range", f"level {level} but the modality has {num_levels} levels (0..{num_levels - 1})")
        return ObservationCheck(one_hot(level, num_levels))
    if level != -1:
        return ObservationCheck(None, "level_out_of_range", f"level {level}: expected 0..{num_levels - 1}, or -1 to use probabilities")
    p = np.asarray(probabilities, dtype=np.float64).ravel()
    if p.size != num_levels:
        return ObservationCheck(None, "wrong_length", f"probabilities has {p.size} entries, the modality has {num_levels} levels")
    if not np.all(np.isfinite(p)):
        return ObservationCheck(None, "non_finite", f"probabilities contain NaN/inf at index {int(np.argmin(np.isfinite(p)))}")
    if np.any(p < 0):
        i = int(np.argmax(p < 0))
        return ObservationCheck(None, "negative", f"probabilities[{i}] = {p[i]:g} < 0")
    total = float(p.sum())
    if not total > 0.0:
        return ObservationCheck(None, "all_zero", "probabilities sum to 0")
    renormalized = abs(total - 1.0) > RENORMALIZE_ATOL
    return ObservationCheck((p / total).astype(np.float32), renormalized=renormalized,
                            detail=f"probabilities sum to {total:g}; renormalised" if renormalized else "")


def stamp_to_ns(sec: int, nanosec: int) -> int:
    return int(sec) * 1_000_000_000 + int(nanosec)


def belief_summary(probabilities: np.ndarray) -> tuple[int, float]:
    """(index of the most likely state, the first one on a tie; Shannon entropy in nats) of one belief."""
    p = np.asarray(probabilities, dtype=np.float64)
    nz = p[p > 0]
    return int(np.argmax(p)), float(-np.sum(nz * np.log(nz)))


def beliefs_from_packed(packed: np.ndarray, state_offsets: Sequence[int]) -> list[np.ndarray]:
    """(sum n_f,) -> F float32 arrays (the Belief.probabilities payloads)."""
    packed = np.asarray(packed, dtype=np.float32)
    return [packed[state_offsets[f]:state_offsets[f + 1]] for f in range(len(state_offsets) - 1)]


class SequenceWindow:
    """The fixed-size VMP/MMP window (right-aligned; only the last ``valid_steps`` rows are real).

    ``obs``: (T, O) float32, ``actions``: (T-1, F) int32 where ``actions[t]`` moved step t to t+1,
    ``valid_steps`` in 0..T. One fixed T means one compiled program (pymdp PR #349's padded windows).
    Padding rows hold uniform observations and action 0; the engine masks them out via valid_steps.
    """

    def __init__(self, horizon: int, num_obs: Sequence[int], num_factors: int):
        if horizon < 1:
            raise ValueError(f"horizon: expected >= 1, got {horizon}")
        self.horizon = int(horizon)
        self.num_obs = tuple(int(m) for m in num_obs)
        self.num_factors = int(num_factors)
        self._pad_row = np.concatenate([uniform(m) for m in self.num_obs])
        self.obs = np.tile(self._pad_row, (self.horizon, 1))
        self.actions = np.zeros((max(self.horizon - 1, 0), self.num_factors), dtype=np.int32)
        self.stamps = np.full(self.horizon, -1, dtype=np.int64)  # each step's stamp (ns); -1 on padding
        self.valid_steps = 0

    def clear(self) -> None:
        self.obs[:] = self._pad_row
        self.actions[:] = 0
        self.stamps[:] = -1
        self.valid_steps = 0

    def push(self, obs_row: np.ndarray, action: Optional[Sequence[int]] = None, stamp_ns: int = -1) -> None:
        """Append one step stamped ``stamp_ns``. ``action`` (F,) is the control that led from the previous step
        to this one."""
        self.obs[:-1] = self.obs[1:]
        self.obs[-1] = obs_row
        self.stamps[:-1] = self.stamps[1:]
        self.stamps[-1] = int(stamp_ns)
        if self.horizon > 1:
            self.actions[:-1] = self.actions[1:]
            self.actions[-1] = 0 if action is None else np.asarray(action, dtype=np.int32)
        self.valid_steps = min(self.valid_steps + 1, self.horizon)

    def resized(self, horizon: int) -> "SequenceWindow":
        """A window of another length holding the newest min(old, new) real steps."""
        new = SequenceWindow(horizon, self.num_obs, self.num_factors)
        keep = min(self.valid_steps, new.horizon)
        if keep:
            new.obs[-keep:] = self.obs[-keep:]
            new.stamps[-keep:] = self.stamps[-keep:]
            if keep > 1:
                new.actions[-(keep - 1):] = self.actions[-(keep - 1):]
            new.valid_steps = keep
        return new


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


def unknown_parameters(names: Iterable[str], known: Iterable[str], known_prefixes: Sequence[str] = ("model.",)) -> list[str]:
    """Warnings for params-file keys the node does not know, each with a "did you mean" when one is close."""
    known = sorted(set(known))
    out = []
    for name in sorted(names):
        if name in known or name == "use_sim_time" or name.startswith("qos_overrides.") or any(name.startswith(p) for p in known_prefixes):
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
        out.append(f"unknown parameter '{name}' ignored" + (f" (did you mean '{close[0]}'?)" if close else ""))
    return out
