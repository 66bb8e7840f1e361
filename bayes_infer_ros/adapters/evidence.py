"""Soft evidence from a sensor's declared noise (pure): the probabilities over a modality's levels that an adapter
sends instead of a one-hot level.

- ``sigma`` (bins): the reading is the true value plus Gaussian noise of that standard deviation; the observation
  is the mass of N(value, sigma^2) in each interval of the bins, the first interval open below and the last open
  above (they take the tails), summed by the intervals' levels.
- ``confusion.<level>``: the row of the sensor's confusion matrix for the level the value reads as.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np


def normal_cdf(z: float) -> float:
    """P(Z <= z) for a standard normal Z (``math.erfc``: exact in both tails)."""
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def interval_mass(value: float, low: float, high: float, sigma: float) -> float:
    """P(low <= X < high) for X ~ N(value, sigma^2); low may be -inf and high +inf. Taken in the tail where the
    interval lies, so far intervals keep their relative precision."""
    a, b = (low - value) / sigma, (high - value) / sigma
    if a > 0:  # right of the mean: upper tails
        return normal_cdf(-a) - normal_cdf(-b)
    return normal_cdf(b) - normal_cdf(a)


def bin_probabilities(value: float, edges: tuple[float, ...], bin_levels: tuple[int, ...], sigma: float,
                      num_levels: int) -> tuple[float, ...]:
    """(num_levels,) the Gaussian mass of each interval of ``edges`` around ``value``, summed by level; the first
    interval reaches down to -inf and the last up to +inf. ``value`` may be +-inf (all its mass in the outer
    interval on that side)."""
    inner = list(edges[1:-1])
    lows, highs = [-math.inf] + inner, inner + [math.inf]
    out = np.zeros(num_levels, dtype=np.float64)
    for level, low, high in zip(bin_levels, lows, highs):
        if math.isinf(value):
            out[level] += 1.0 if (value > 0 and high == math.inf) or (value < 0 and low == -math.inf) else 0.0
        else:
            out[level] += interval_mass(value, low, high, sigma)
    return tuple(float(p) for p in out / out.sum())


def level_probabilities(level: int, confusion: tuple[tuple[int, tuple[float, ...]], ...]) -> Optional[tuple[float, ...]]:
    """The confusion row of ``level``, or None (one-hot) when it has none."""
    for row_level, row in confusion:
        if row_level == level:
            return row
    return None
