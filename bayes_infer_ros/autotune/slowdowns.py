"""How much slower than an install's start variant another candidate is predicted to run on a model, from the
training models nearest to it in structure: the evidence for leaving a candidate out of the verify step (it is
not compiled at all) when it is predicted to lose by a wide margin.

    table = entry["slowdowns"]                         # written by training (lab/train_autotuner.py)
    slowdown = predict(table, model, "baseline")       # Slowdown(ratio=4.4, nearest=("c0571", ...), ...)
    slowdown.wide                                      # ratio >= WIDE_MARGIN: not worth compiling

A table holds, per training configuration, its structure as a point (ln M, ln F, ln of the dense A elements: M
modalities, F factors) and each variant's latency over the start variant's (NaN where it did not run). The
prediction for a model is the *smallest* ratio among its ``NEIGHBOURS`` nearest training models (Euclidean
distance between the points): a candidate is left out only when even the most favourable similar model saw it lose
by ``WIDE_MARGIN`` or more. Pure numpy over a few dozen rows; the structure only, never array values.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from .features import structure_of

#: How many of the nearest training models a prediction reads.
NEIGHBOURS = 3
#: A candidate predicted this many times slower than the start (or more) is not compiled.
WIDE_MARGIN = 2.0
#: The coordinates of a structure point, in the order the tables store them.
AXES = ("ln_M", "ln_F", "ln_A")


def structure_point(model: Any) -> tuple[float, float, float]:
    """(ln M, ln F, ln dense A elements) of a GenerativeModel, a ModelStructure or a generator spec."""
    s = structure_of(model)
    dense = sum(m * math.prod(s.num_states[f] for f in deps) for m, deps in zip(s.num_obs, s.A_dependencies))
    return math.log(len(s.num_obs)), math.log(len(s.num_states)), math.log(max(dense, 1))


@dataclass(frozen=True)
class Slowdown:
    """A candidate's predicted time over the start's (``ratio``: the smallest of ``ratios``, measured on the
    training models ``nearest``), against ``reference`` (the start variant)."""

    variant: str
    reference: str
    ratio: float
    nearest: tuple[str, ...]
    ratios: tuple[float, ...]

    @property
    def wide(self) -> bool:
        return self.ratio >= WIDE_MARGIN

    def describe(self) -> str:
        """``predicted at least 3.3x slower than fused_numba: 3.4x, 3.9x, 3.3x on the 3 most similar training models
        (c0049, c0031, c0056)``"""
        seen = ", ".join(f"{r:.2g}x" for r in self.ratios)
        return (f"predicted at least {self.ratio:.2g}x slower than {self.reference}: {seen} on the {len(self.ratios)} "
                f"most similar training models ({', '.join(self.nearest)})")


def points_from_features(X: np.ndarray, names: Sequence[str]) -> np.ndarray:
    """(n, 3) structure points (``AXES``) of feature rows ``X`` (n, features) in the columns ``names``
    (``features.feature_names()``): the same numbers as :func:`structure_point`."""
    X = np.atleast_2d(np.asarray(X, dtype=float))
    col = list(names).index
    return np.stack([X[:, col("log_M")], X[:, col("log_F")], X[:, col("log_a_total")] * math.log(10)], axis=1)


def table(points: np.ndarray, latencies: np.ndarray, variants: Sequence[str], reference: str,
          config_ids: Sequence[str]) -> dict:
    """The JSON table training stores: ``points`` (n, 3) structure points (``AXES``), ``latencies`` (n, variants)
    seconds (NaN: did not run), each variant's ratio to ``reference``'s column."""
    ref = latencies[:, list(variants).index(reference)]
    return {"reference": reference, "axes": list(AXES), "configs": list(config_ids),
            "points": np.round(points, 5).tolist(),
            "ratios": {v: [None if not np.isfinite(r) else round(float(r), 4) for r in latencies[:, j] / ref]
                       for j, v in enumerate(variants) if v != reference}}


def predict(stored: Optional[Mapping], model: Any, variant: str) -> Optional[Slowdown]:
    """``variant``'s predicted slowdown against the table's reference on ``model``; None without a table or
    without ratios of ``variant`` on enough training models."""
    if not stored or variant not in stored.get("ratios", {}):
        return None
    ratios = np.array([np.nan if r is None else r for r in stored["ratios"][variant]], dtype=float)
    points = np.asarray(stored["points"], dtype=float)
    ran = np.isfinite(ratios)
    if ran.sum() < NEIGHBOURS:
        return None
    distance = np.linalg.norm(points[ran] - np.asarray(structure_point(model)), axis=1)
    nearest = np.argsort(distance, kind="stable")[:NEIGHBOURS]
    seen = ratios[ran][nearest]
    ids = np.asarray(stored["configs"])[ran][nearest]
    return Slowdown(variant, stored["reference"], float(seen.min()), tuple(str(i) for i in ids),
                    tuple(float(r) for r in seen))
