"""Features of a model's *structure* only (no array values), and per-variant size estimates.

Everything here is a function of (num_obs, num_states, num_controls, A_dependencies) plus the run settings
(horizon, num_iter, backend), computed in well under a millisecond for the paper's largest models, so
``select_variant`` stays fast and the harness can decide a memory skip *before* building anything.

Size estimates (stored elements of the prepared likelihood arrays, the quantity the paper calls parameter
count) follow the paper's constructions (Section III and the Appendix):

- ``baseline``: the M log-tensors, sum_i m_i prod n_deps.
- ``hybrid``: axis-aligned, per-axis maxima: M x max m x prod_a max_{i: k_i > a} n_{deps_i[a]}.
- ``end_to_end``: one global n_max on every lagging axis: M x max m x n_max ** k_max.
- ``hybrid_block``: block-diagonal: (sum_i p_i) x (sum_i m_i), p_i = prod n_deps.
- ``sparse_*``: BCOO stores nse values plus nse x ndim indices; nse = the real (non-padding) entries.
- ``clustered_hybrid`` / ``clustered_end_to_end``: the axis-aligned sizes summed over rank clusters (end-to-end:
  each cluster padded to its own widest factor).
- ``clustered_hybrid_block``: agglomerative merging of blocks (smallest added zeros r_i c_j + r_j c_i first),
  stopped at the elbow of the cumulative added-zeros curve (largest distance below the chord).

The variants' own ``parameter_counts`` (when present) are exact for their layouts; these estimates may
differ by the order of dependency axes a variant chooses, which is why they are only used for features
and for the memory-budget pre-check (and, through the features, for the size guard in ``guard.py``).
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Optional, Sequence

import numpy as np

BACKENDS = ("cpu", "gpu", "tpu")
_EPS = 1e-12


def _structure_of(model: Any):
    """Accept a GenerativeModel, a ModelStructure, or a generator ConfigSpec."""
    if hasattr(model, "structure") and not isinstance(model, tuple):
        s = model.structure
        if callable(s):  # pragma: no cover - defensive
            s = s()
        return s.num_obs, s.num_states, s.num_controls, s.A_dependencies
    if hasattr(model, "A_dependencies") and hasattr(model, "num_obs"):
        controls = getattr(model, "num_controls", None) or (1,) * len(model.num_states)
        return tuple(model.num_obs), tuple(model.num_states), tuple(controls), tuple(map(tuple, model.A_dependencies))
    raise TypeError(f"cannot read a model structure from {type(model).__name__}")


def _axis_aligned(num_obs, num_states, deps, global_nmax: Optional[int] = None) -> int:
    if not deps:
        return 0
    k_max = max(len(d) for d in deps)
    size = len(deps) * max(num_obs)
    for a in range(k_max):
        if global_nmax is not None:
            size *= global_nmax
        else:
            size *= max((num_states[d[a]] for d in deps if len(d) > a), default=1)
    return size


def _rank_clusters(deps: Sequence[Sequence[int]]) -> dict[int, list[int]]:
    clusters: dict[int, list[int]] = {}
    for i, d in enumerate(deps):
        clusters.setdefault(len(d), []).append(i)
    return clusters


def elbow_index(curve: Sequence[float]) -> int:
    """Index of the elbow of a non-decreasing convex curve: the point farthest below the chord."""
    y = np.asarray(curve, dtype=float)
    if len(y) < 3:
        return len(y) - 1
    x = np.linspace(0.0, 1.0, len(y))
    span = y[-1] - y[0]
    if span <= 0:
        return len(y) - 1
    yn = (y - y[0]) / span
    return int(np.argmax(x - yn))


def agglomerative_blocks(rows: Sequence[int], cols: Sequence[int]) -> tuple[list[list[int]], int]:
    """Greedy block-diagonal clustering with the paper's added-zeros cost and an elbow stop.

    rows[i] = p_i (flattened lagging size), cols[i] = m_i. Returns (clusters of input indices, added zeros).
    O(M^2) numpy work per merge; M <= 125 keeps this in milliseconds.
    """
    n = len(rows)
    r = np.asarray(rows, dtype=float).copy()
    c = np.asarray(cols, dtype=float).copy()
    added = [0.0]
    merges: list[tuple[int, int]] = []
    alive = np.ones(n, dtype=bool)
    while alive.sum() > 1:
        idx = np.flatnonzero(alive)
        rr, cc = r[idx], c[idx]
        delta = np.outer(rr, cc)
        delta += delta.T
        np.fill_diagonal(delta, np.inf)
        a, b = np.unravel_index(np.argmin(delta), delta.shape)
        i, j = int(idx[a]), int(idx[b])
        added.append(added[-1] + float(delta[a, b]))
        r[i] += r[j]
        c[i] += c[j]
        alive[j] = False
        merges.append((i, j))
    stop = elbow_index(added)
    members = [[i] for i in range(n)]
    for i, j in merges[:stop]:
        members[i] += members[j]
        members[j] = []
    return [m for m in members if m], int(added[stop])


def size_estimates(model: Any) -> dict[str, int]:
    """Estimated stored elements of each variant's prepared likelihood arrays (see module docstring)."""
    num_obs, num_states, _, deps = _structure_of(model)
    return dict(_size_estimates(tuple(num_obs), tuple(num_states), tuple(tuple(d) for d in deps)))


@lru_cache(maxsize=256)
def _size_estimates(num_obs: tuple, num_states: tuple, deps: tuple) -> dict[str, int]:
    p = [math.prod(num_states[f] for f in d) for d in deps]
    dense = int(sum(m * pi for m, pi in zip(num_obs, p)))
    nmax = max(num_states)
    hybrid = _axis_aligned(num_obs, num_states, deps)
    e2e = _axis_aligned(num_obs, num_states, deps, global_nmax=nmax)
    block = int(sum(p) * sum(num_obs))
    clusters = _rank_clusters(deps)
    c_hybrid = c_e2e = 0
    for members in clusters.values():
        sub_deps = [deps[i] for i in members]
        sub_obs = [num_obs[i] for i in members]
        c_hybrid += _axis_aligned(sub_obs, num_states, sub_deps)
        width = max(num_states[f] for d in sub_deps for f in d)  # each cluster padded to its own widest factor
        c_e2e += _axis_aligned(sub_obs, num_states, sub_deps, global_nmax=width)
    blocks, _ = agglomerative_blocks(p, num_obs)
    c_block = int(sum(sum(p[i] for i in b) * sum(num_obs[i] for i in b) for b in blocks))
    k_max = max(len(d) for d in deps)
    return {
        "baseline": dense,
        "hybrid": hybrid,
        "end_to_end": e2e,
        "hybrid_block": block,
        "clustered_hybrid": c_hybrid,
        "clustered_end_to_end": c_e2e,
        "clustered_hybrid_block": c_block,
        # BCOO: nse values + nse x (number of sparse dims) int32 indices, counted as elements.
        "sparse_hybrid": dense * (1 + 2 + k_max),
        "sparse_end_to_end": dense * (1 + 2 + k_max),
        "sparse_hybrid_block": dense * (1 + 2),
        "_num_rank_clusters": len(clusters),
        "_num_block_clusters": len(blocks),
        "_dense_padded_hybrid": hybrid,
        "_dense_padded_end_to_end": e2e,
        "_dense_padded_block": block,
    }


def peak_elements(variant: str, estimates: dict[str, int]) -> int:
    """Elements a variant may hold at once while it is built (its dense padded form for a naive BCOO build)."""
    stored = estimates.get(variant, estimates["baseline"])
    # A log-tensor and its source array coexist during the build.
    peak = 2 * max(stored, estimates["baseline"])
    if variant == "sparse_end_to_end":
        # built by BCOO conversion of the dense padded tensor (the hybrid BCOOs are built from blocks)
        peak = max(peak, estimates["_dense_padded_end_to_end"])
    return int(peak)


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
    from types import SimpleNamespace

    tiny = SimpleNamespace(num_obs=(2, 3), num_states=(2, 2), num_controls=(1, 1), A_dependencies=((0,), (0, 1)))
    return list(structure_features(tiny).keys())


def feature_vector(model: Any, horizon: int = 1, num_iter: int = 16, backend: str = "cpu") -> np.ndarray:
    f = structure_features(model, horizon, num_iter, backend)
    return np.array([f[k] for k in feature_names()], dtype=np.float32)
