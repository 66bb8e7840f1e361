"""The size guard: never pick a variant padded far beyond any size at which it was ever (nearly) the fastest.

A classifier predicts *which* variant is fastest, not *how much* a wrong pick costs. On this project's CPU
sweep, the shipped XGBoost once chose ``clustered_end_to_end`` for a model (c0366) where its zero-padded tensor is
~1500x the dense A arrays; it ran 763x slower than ``baseline``. The guard is the cost-aware part of the
selector, learned from the same training data:

- the padding of a variant on a model is ``log10(padded elements / dense A elements)``, computed from the
  structure features (``log_size_<layout> - log_a_total``; the sparse variants pad as their dense layouts do,
  and ``baseline`` never pads, nor do the fused family and the native engine ``fused_numba``, which are
  therefore never dropped);
- the ceiling of a variant is the largest padding at which it came within ``tolerance`` (10%) of the
  fastest variant on a training configuration (0 when it never did);
- at selection time a variant whose padding exceeds its ceiling by more than ``margin`` (a factor of 2) is
  dropped from the ranking. ``baseline`` is never dropped.

All functions are pure numpy over the feature matrix (rows: configurations, columns: ``feature_names()``).
"""
from __future__ import annotations

import math
from typing import Mapping, Optional, Sequence

import numpy as np

from ..inference import VARIANTS
from .features import feature_names

TOLERANCE = 0.10
MARGIN = 2.0



def padded_layout(variant: str) -> Optional[str]:
    """The dense padded layout whose size measures ``variant``'s padding: its own, or for a sparse variant
    its dense counterpart's; None for a variant without a ``log_size_<layout>`` feature (baseline and the
    fused family: no padding measured)."""
    layout = variant.removeprefix("sparse_")
    return layout if f"log_size_{layout}" in feature_names() else None


# variant -> the dense padded layout whose size measures its padding (None: no padding)
PADDED_LAYOUT: dict[str, Optional[str]] = {v: padded_layout(v) for v in VARIANTS}


def padding(X: np.ndarray, variants: Sequence[str]) -> np.ndarray:
    """X: (n, features) -> (n, len(variants)) log10 padding factor of each variant (0 for a variant that does
    not pad and for unknown names)."""
    X = np.atleast_2d(np.asarray(X, dtype=np.float64))
    names = feature_names()
    dense = X[:, names.index("log_a_total")]
    out = np.zeros((len(X), len(variants)))
    for j, v in enumerate(variants):
        layout = PADDED_LAYOUT.get(v)
        if layout is not None:
            out[:, j] = np.maximum(X[:, names.index(f"log_size_{layout}")] - dense, 0.0)
    return out


def fit_ceilings(X: np.ndarray, L: np.ndarray, variants: Sequence[str], tolerance: float = TOLERANCE
                 ) -> dict[str, float]:
    """Per variant, the largest log10 padding at which its latency was within ``tolerance`` of the best.

    X: (n, features); L: (n, len(variants)) latencies, NaN where a variant did not run.
    """
    P = padding(X, variants)
    best = np.nanmin(L, axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):
        near = np.isfinite(L) & (L <= best * (1.0 + tolerance))
    return {v: float(P[near[:, j], j].max()) if near[:, j].any() else 0.0 for j, v in enumerate(variants)
            if v != "baseline"}


def allowed(X: np.ndarray, variants: Sequence[str], ceilings: Optional[Mapping[str, float]],
            margin: float = MARGIN) -> np.ndarray:
    """(n, len(variants)) bool: True where the guard lets a variant be picked (no ceilings: all True)."""
    X = np.atleast_2d(X)
    ok = np.ones((len(X), len(variants)), dtype=bool)
    if not ceilings:
        return ok
    P = padding(X, variants)
    slack = math.log10(margin)
    for j, v in enumerate(variants):
        if v in ceilings:
            ok[:, j] = P[:, j] <= ceilings[v] + slack + 1e-9
    return ok
