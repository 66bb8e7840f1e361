"""Features of a model's *structure* only (no array values), and per-variant sizes.

Everything here is a function of (num_obs, num_states, num_controls, A_dependencies) plus the run settings
(horizon, num_iter, backend), computed in milliseconds for the paper's largest models, so ``select_variant``
stays fast and the harness can decide a memory skip *before* building anything.

The sizes (stored elements of the prepared likelihood arrays, the quantity the paper calls parameter count)
are the variants' own: ``inference.size_estimates`` counts each variant from the plan its build uses
(clusters, padded shapes, size-sorted axes; ``inference.sizes``), with every real entry of log A counted
as non-zero for the BCOO variants. The cluster counts are those plans' rank clusters and agglomerative
clusters at the elbow.
"""
from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any, Sequence

import numpy as np

from ..inference import peak_elements  # noqa: F401  (the memory pre-check of the callers of size_estimates)
from ..inference import size_estimates as size_estimates_of_structure
from ..model.generative_model import ModelStructure, as_deps, trivial_B_dependencies

BACKENDS = ("cpu", "gpu", "tpu")
_EPS = 1e-12


def _structure_of(model: Any):
    """Accept a GenerativeModel, a ModelStructure, or a generator ConfigSpec."""
    if hasattr(model, "structure") and not isinstance(model, tuple):
        s = model.structure
        return s.num_obs, s.num_states, s.num_controls, s.A_dependencies
    if hasattr(model, "A_dependencies") and hasattr(model, "num_obs"):
        controls = getattr(model, "num_controls", None) or (1,) * len(model.num_states)
        return tuple(model.num_obs), tuple(model.num_states), tuple(controls), tuple(map(tuple, model.A_dependencies))
    raise TypeError(f"cannot read a model structure from {type(model).__name__}")


def structure_of(model: Any) -> ModelStructure:
    """The ModelStructure of a GenerativeModel, a ModelStructure, or a generator ConfigSpec (B-dependencies
    do not change any likelihood layout; a spec gets pymdp's default ones)."""
    num_obs, num_states, num_controls, deps = _structure_of(model)
    return ModelStructure(num_obs=tuple(int(m) for m in num_obs), num_states=tuple(int(n) for n in num_states),
                          num_controls=tuple(int(u) for u in num_controls), A_dependencies=as_deps(deps),
                          B_dependencies=trivial_B_dependencies(len(num_states)))


def size_estimates(model: Any) -> dict[str, int]:
    """Stored elements of every variant's prepared likelihood arrays, from the variants' real plans
    (``inference.size_estimates`` on the model's structure; see the module docstring)."""
    return size_estimates_of_structure(structure_of(model))


def _stats(prefix: str, xs: Sequence[float]) -> dict[str, float]:
    a = np.asarray(xs, dtype=float)
    return {f"{prefix}_mean": float(a.mean()), f"{prefix}_std": float(a.std()), f"{prefix}_min": float(a.min()),
            f"{prefix}_max": float(a.max())}


def structure_features(model: Any, horizon: int = 1, num_iter: int = 16, backend: str = "cpu") -> dict[str, float]:
    """A flat, fixed-order dict of floats describing the structure (the classifier's input row)."""
    num_obs, num_states, num_controls, deps = _structure_of(model)
    F, M = len(num_states), len(num_obs)
    lens = [len(d) for d in deps]
    p = [math.prod(num_states[f] for f in d) for d in deps]
    a_elems = [m * pi for m, pi in zip(num_obs, p)]
    degree = np.zeros(F)
    for d in deps:
        for f in d:
            degree[f] += 1
    est = size_estimates(model)
    dense = max(est["baseline"], 1)
    feats: dict[str, float] = {"F": F, "M": M, "log_F": math.log(F), "log_M": math.log(M)}
    feats.update(_stats("n", num_states))
    feats.update(_stats("m", num_obs))
    feats.update(_stats("k", lens))
    feats.update(_stats("factor_degree", degree))
    feats.update(_stats("u", num_controls))
    feats["k_frac_1"] = float(np.mean(np.asarray(lens) == 1))
    feats["k_frac_ge3"] = float(np.mean(np.asarray(lens) >= 3))
    feats["edges"] = float(sum(lens))
    feats["sum_m"] = float(sum(num_obs))
    feats["sum_n"] = float(sum(num_states))
    feats["log_a_total"] = math.log10(dense)
    feats["log_a_max"] = math.log10(max(a_elems))
    feats["log_a_mean"] = math.log10(np.mean(a_elems))
    feats["a_size_cv"] = float(np.std(a_elems) / (np.mean(a_elems) + _EPS))
    feats["log_b_total"] = math.log10(sum(n * n * u for n, u in zip(num_states, num_controls)))
    for name in ("hybrid", "end_to_end", "hybrid_block", "clustered_hybrid", "clustered_end_to_end",
                 "clustered_hybrid_block"):
        size = max(est[name], 1)
        feats[f"log_size_{name}"] = math.log10(size)
        feats[f"zero_frac_{name}"] = 1.0 - min(dense / size, 1.0)
    feats["num_rank_clusters"] = est["_num_rank_clusters"]
    feats["num_block_clusters"] = est["_num_block_clusters"]
    feats["horizon"] = float(horizon)
    feats["log_horizon_work"] = math.log10(dense * max(horizon, 1))
    feats["num_iter"] = float(num_iter)
    for b in BACKENDS:
        feats[f"backend_{b}"] = float(backend == b)
    return feats


def feature_names() -> list[str]:
    """Column order of :func:`structure_features` (computed on a tiny model, so it never drifts)."""
    tiny = SimpleNamespace(num_obs=(2, 3), num_states=(2, 2), num_controls=(1, 1), A_dependencies=((0,), (0, 1)))
    return list(structure_features(tiny).keys())


def feature_vector(model: Any, horizon: int = 1, num_iter: int = 16, backend: str = "cpu") -> np.ndarray:
    f = structure_features(model, horizon, num_iter, backend)
    return np.array([f[k] for k in feature_names()], dtype=np.float32)
