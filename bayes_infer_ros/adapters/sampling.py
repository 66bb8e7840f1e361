"""The inverse of an adapter, for sample bags: a message value that the adapter reads as a given level.

- bins: uniform within the first interval of ``bins`` whose level is the wanted one (an infinite edge is
  replaced by the finite one +- ``INFINITE_EDGE_SPAN``);
- levels: one of the values listed for the level, chosen uniformly;
- a reduction over a sequence: every entry of ``index_range`` gets a value of the wanted level's interval (so
  min, max and mean all fall in it); the entries outside it get any value within the bins.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .config import AdapterSpec

INFINITE_EDGE_SPAN = 10.0
# Length of a sequence field (a LaserScan's ranges) when index_range does not need more.
DEFAULT_SEQUENCE_LENGTH = 360


class NotSampleable(ValueError):
    """The adapter gives no value for a level (its bins / levels never produce it)."""


def _interval(spec: AdapterSpec, level: int) -> tuple[float, float]:
    for k, got in enumerate(spec.bin_levels):
        if got == level:
            lo, hi = spec.bins[k], spec.bins[k + 1]
            if not math.isfinite(lo):
                lo = hi - INFINITE_EDGE_SPAN
            if not math.isfinite(hi):
                hi = lo + INFINITE_EDGE_SPAN
            return lo, hi
    raise NotSampleable(f"{spec.param}: no interval of bins gives level {level} (bin_levels {list(spec.bin_levels)})")


def _uniform(rng: np.random.Generator, lo: float, hi: float, size=None) -> Any:
    # [lo, hi) in float32 (the fields are float32 mostly): keep clear of hi, which rounding could reach
    width = (hi - lo) * (1.0 - 1e-3)
    return lo + rng.random(size) * width


def sample_value(spec: AdapterSpec, level: int, rng: np.random.Generator) -> Any:
    """A value of ``spec.field`` that :func:`~.reading.read_level` reads as ``level`` (a float array for a
    reduced sequence). NotSampleable when no value gives it."""
    if spec.bins is None:
        values = [v for v, got in spec.level_of if got == level]
        if not values:
            raise NotSampleable(f"{spec.param}.levels: no value gives level {level}")
        return values[int(rng.integers(len(values)))]
    lo, hi = _interval(spec, level)
    if spec.reduction is None:
        return float(_uniform(rng, lo, hi))
    first, end = spec.index_range or (0, DEFAULT_SEQUENCE_LENGTH)
    length = max(end, DEFAULT_SEQUENCE_LENGTH)
    edges_lo = spec.bins[0] if math.isfinite(spec.bins[0]) else lo
    edges_hi = spec.bins[-1] if math.isfinite(spec.bins[-1]) else hi
    out = _uniform(rng, edges_lo, edges_hi, length)
    out[first:end] = _uniform(rng, lo, hi, end - first)
    return out.astype(np.float32)
