"""The selector: what the training data says about a model, from its structure alone, in milliseconds. The
variants predicted fastest on a device platform, the ones left out and why, and the evidence ``decision`` reads.

    rank = ranking("mmp", model, horizon=5, num_iter=16, backend="gpu")
    rank.ranked     # [("fused_dense", 0.61), ..., ("baseline", 0.0)]
    rank.dropped    # {"end_to_end": "size guard: padded ...", ...}
    budget = MemoryBudget.from_mib(2048, "memory_budget_mb")      # the node's parameter
    budget.check("hybrid_block", model)    # the estimate in bytes, or MemoryBudgetExceeded naming the parameter

In the order a selection reads them:

- **Structure features** (:func:`structure_features`): a flat row of floats from (num_obs, num_states,
  num_controls, A_dependencies) and the run settings (horizon, num_iter, backend), never array values. The
  variants' sizes (:func:`size_estimates`: stored elements of the prepared likelihood arrays, the paper's
  parameter count) come from the plans their builds use (``inference.size_estimates``: clusters, padded shapes,
  size-sorted axes), with every real entry of log A counted as non-zero for the BCOO variants.
- **The memory budget** (:class:`MemoryBudget`): one unit (bytes), one structure-only estimate
  (:func:`peak_elements` over the sizes), one check, for the node, the autotuner and the harness. Nothing is
  allocated: a layout too large to build is refused before it is built.
- **The size guard** (:func:`guard_allowed`): never pick a variant padded far beyond any size at which it was ever
  (nearly) the fastest. A classifier predicts *which* variant is fastest, not *how much* a wrong pick costs: on
  this project's CPU sweep the shipped XGBoost once chose ``clustered_end_to_end`` for a model (c0366) whose
  zero-padded tensor is ~1500x the dense A arrays; it ran 763x slower than ``baseline``. A variant's padding on a
  model is ``log10(padded elements / dense A elements)`` (``log_size_<layout> - log_a_total``; the sparse variants
  pad as their dense layouts do; ``baseline``, the fused family and ``fused_numba`` never pad). Its ceiling is the
  largest padding at which it came within ``GUARD_TOLERANCE`` (10%) of the fastest on a training configuration (0
  when it never did). A variant whose padding exceeds its ceiling by more than ``GUARD_MARGIN`` (a factor of 2) is
  dropped; ``baseline`` never is.
- **The forest** (:class:`NumpyForest`): XGBoost's JSON model (multi:softprob) evaluated in numpy, all trees at
  once, level by level, so the robot needs no xgboost. Semantics follow XGBoost: left when ``x <
  split_condition``, missing values follow ``default_left``; a class margin is its base score plus its trees'
  leaves; probabilities are the softmax.
- **Slowdowns** (:func:`predict_slowdown`): how much slower than an install's start variant another candidate is
  predicted to run, from the training models nearest in structure, (ln M, ln F, ln dense A elements). The
  prediction is the *smallest* ratio among the ``SLOWDOWN_NEIGHBOURS`` nearest: a candidate is left out of the
  verify step (not compiled at all) only when even the most favourable similar model saw it lose by
  ``WIDE_MARGIN`` or more.
- **The ranking** (:func:`ranking`): every ranked name is in ``VARIANTS``, buildable here (a native engine needs its
  library), within the memory budget and allowed by the size guard; ``baseline``, which runs every model, comes
  last when the model did not score it. A device whose training data had one winner everywhere
  (``TrainedModel.constant``: the CPU with numba) is not ranked: ``decision`` starts that winner. What runs is
  ``decision``'s (devices, the start, the verify step, the fallback).

Model files: ``<model_dir>/<backend>_<algorithm>.json`` (XGBoost JSON) and ``<backend>_meta.json``, by default the
ones shipped in ``bayes_infer_ros/autotune/models``; override with ``model_dir=`` or the environment variable
``BAYES_INFER_AUTOTUNE_DIR`` (a retrained model for your own device, see docs/autotune.md). A backend without its own
model uses the CPU model.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Mapping, Optional, Protocol, Sequence, Union

import jax
import numpy as np

from .. import inference
from ..inference import VARIANTS, Engine, VariantUnsupported, sizes
from ..inference import size_estimates as size_estimates_of_structure
from ..inference.algorithm_specs import algorithm_spec
from ..inference.native import numba_available
from ..inference.registry import NATIVE_VARIANTS, VARIANT_PLATFORMS
from ..model.generative_model import ModelStructure, as_deps, trivial_B_dependencies


# ---- structure features -------------------------------------------------------------------------------------------
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


# ---- the memory budget --------------------------------------------------------------------------------------------
#: Engines run in float32 unless asked otherwise.
ITEMSIZE = 4
MIB = 2**20
GIB = 2**30


class MemoryBudgetExceeded(VariantUnsupported):
    """A variant's estimated build memory is over the budget."""


def format_bytes(n: float) -> str:
    """``n`` bytes with a binary unit: 552 B, 1.5 KiB, 3.0 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover


def peak_elements(variant: str, estimates: dict[str, int]) -> int:
    """Elements ``variant`` may hold at once while it is built, from ``size_estimates``: a log-tensor and
    its source coexist (twice the larger of the stored arrays and the A tensors); BCOO layouts hold an
    int32 index row per stored value; sparse_end_to_end converts its dense padded tensor to BCOO. A name
    without an estimate (a benchmark's own builder) counts as the unmerged model."""
    stored = estimates.get(variant, estimates["unmerged"])
    if variant in ("sparse_hybrid", "sparse_hybrid_block"):
        stored *= 1 + sizes.HYBRID_BCOO_INDEX_DIMS
    elif variant == "sparse_end_to_end":
        stored *= 1 + sizes.END_TO_END_BCOO_INDEX_DIMS
    peak = 2 * max(stored, estimates["unmerged"])
    if variant == "sparse_end_to_end":
        peak = max(peak, estimates["end_to_end"])
    return int(peak)


def estimated_bytes(variant: str, model: Any, itemsize: int = ITEMSIZE, estimates: Optional[dict] = None) -> int:
    """Peak bytes ``variant``'s prepared arrays may take while built, from the structure of ``model`` (a
    GenerativeModel, a ModelStructure or a generator spec) alone; ``estimates``: its ``size_estimates``, when the
    caller has them."""
    est = estimates if estimates is not None else size_estimates(model)
    return int(peak_elements(variant, est) * itemsize)


@dataclass(frozen=True)
class MemoryBudget:
    """At most ``value`` ``unit`` ("B", "MiB" or "GiB") for one engine's prepared arrays, compared in bytes;
    ``name`` is how the user sets it (for messages)."""

    value: float
    unit: str = "B"
    name: str = "memory budget"

    @classmethod
    def from_mib(cls, mib: float, name: str = "memory budget") -> "MemoryBudget":
        return cls(float(mib), "MiB", name)

    @classmethod
    def from_gib(cls, gib: float, name: str = "memory budget") -> "MemoryBudget":
        return cls(float(gib), "GiB", name)

    @property
    def bytes(self) -> float:
        return self.value * {"B": 1, "MiB": MIB, "GiB": GIB}[self.unit]

    def describe(self) -> str:
        """``memory_budget_mb 2048 (2.0 GiB)``: the setting as the user wrote it, and its size."""
        return f"{self.name} {self.value:g} ({format_bytes(self.bytes)})"

    def fits(self, variant: str, model: Any, itemsize: int = ITEMSIZE, estimates: Optional[dict] = None) -> bool:
        return estimated_bytes(variant, model, itemsize, estimates) <= self.bytes

    def check(self, variant: str, model: Any, itemsize: int = ITEMSIZE, estimates: Optional[dict] = None) -> int:
        """The estimate in bytes; raises :class:`MemoryBudgetExceeded` (naming the setting) when it is over."""
        est = estimated_bytes(variant, model, itemsize, estimates)
        if est > self.bytes:
            base = estimated_bytes("baseline", model, itemsize, estimates)
            raise MemoryBudgetExceeded(
                f"variant {variant}: its arrays are estimated at {format_bytes(est)} while built, over "
                f"{self.describe()}; raise {self.name}, or pick a variant that stores less, e.g. baseline at "
                f"{format_bytes(base)}")
        return est

    def refusal(self, variant: str, model: Any, itemsize: int = ITEMSIZE, estimates: Optional[dict] = None) -> str:
        """Why ``variant`` is over this budget on ``model`` (:meth:`check`'s message), or "" when it fits."""
        try:
            self.check(variant, model, itemsize, estimates)
        except MemoryBudgetExceeded as exc:
            return str(exc)
        return ""


# ---- the size guard -----------------------------------------------------------------------------------------------
GUARD_TOLERANCE = 0.10
GUARD_MARGIN = 2.0


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


def fit_ceilings(X: np.ndarray, L: np.ndarray, variants: Sequence[str], tolerance: float = GUARD_TOLERANCE
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


def guard_allowed(X: np.ndarray, variants: Sequence[str], ceilings: Optional[Mapping[str, float]],
            margin: float = GUARD_MARGIN) -> np.ndarray:
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


# ---- the forest ---------------------------------------------------------------------------------------------------
class NumpyForest:
    """Trees of one XGBoost multi-class model as padded arrays (trees x nodes)."""

    def __init__(self, doc: dict):
        learner = doc["learner"]
        params = learner["learner_model_param"]
        self.num_class = max(int(params.get("num_class", "0")), 1)
        self.num_feature = int(params["num_feature"])
        base = params["base_score"].strip("[]")
        scores = np.array([float(x) for x in base.split(",")], dtype=np.float64)
        objective = learner["objective"]["name"]
        if objective not in ("multi:softprob", "multi:softmax"):
            raise ValueError(f"unsupported XGBoost objective {objective!r}")
        self.base_margin = np.broadcast_to(scores, (self.num_class,)).copy()
        model = learner["gradient_booster"]["model"]
        trees = model["trees"]
        self.tree_class = np.asarray(model["tree_info"], dtype=np.int64)
        n_nodes = max(len(t["left_children"]) for t in trees) if trees else 1
        shape = (len(trees), n_nodes)
        self.left = np.full(shape, -1, dtype=np.int64)
        self.right = np.full(shape, -1, dtype=np.int64)
        self.feature = np.zeros(shape, dtype=np.int64)
        self.cond = np.zeros(shape, dtype=np.float32)
        self.default_left = np.zeros(shape, dtype=bool)
        for k, t in enumerate(trees):
            n = len(t["left_children"])
            self.left[k, :n] = t["left_children"]
            self.right[k, :n] = t["right_children"]
            self.feature[k, :n] = t["split_indices"]
            self.cond[k, :n] = np.asarray(t["split_conditions"], dtype=np.float32)
            self.default_left[k, :n] = np.asarray(t["default_left"], dtype=bool)
        self.depth = self._max_depth()

    def _max_depth(self) -> int:
        depth = 0
        node = np.zeros(len(self.left), dtype=np.int64)
        rows = np.arange(len(self.left))
        while len(rows):
            leaf = self.left[rows, node] < 0
            rows, node = rows[~leaf], self.left[rows[~leaf], node[~leaf]]
            depth += 1
        return depth

    @classmethod
    def load(cls, path: Union[str, Path]) -> "NumpyForest":
        return cls(json.loads(Path(path).read_text()))

    def margins(self, X: np.ndarray) -> np.ndarray:
        """X: (rows, features) float32 -> (rows, classes) raw margins."""
        X = np.asarray(X, dtype=np.float32)
        if X.ndim == 1:
            X = X[None]
        out = np.tile(self.base_margin, (X.shape[0], 1))
        trees = np.arange(len(self.left))
        for r in range(X.shape[0]):
            node = np.zeros(len(trees), dtype=np.int64)
            for _ in range(self.depth):
                left = self.left[trees, node]
                internal = left >= 0
                x = X[r, self.feature[trees, node]]
                go_left = np.where(np.isnan(x), self.default_left[trees, node], x < self.cond[trees, node])
                nxt = np.where(go_left, left, self.right[trees, node])
                node = np.where(internal, nxt, node)
            leaf = self.cond[trees, node].astype(np.float64)
            out[r] += np.bincount(self.tree_class, weights=leaf, minlength=self.num_class)
        return out

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        m = self.margins(X)
        m -= m.max(axis=1, keepdims=True)
        e = np.exp(m)
        return e / e.sum(axis=1, keepdims=True)


# ---- slowdowns ----------------------------------------------------------------------------------------------------
#: How many of the nearest training models a prediction reads.
SLOWDOWN_NEIGHBOURS = 3
#: A candidate predicted this many times slower than the start (or more) is not compiled.
WIDE_MARGIN = 2.0
#: The coordinates of a structure point, in the order the tables store them.
SLOWDOWN_AXES = ("ln_M", "ln_F", "ln_A")


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
    """(n, 3) structure points (``SLOWDOWN_AXES``) of feature rows ``X`` (n, features) in the columns ``names``
    (:func:`feature_names`): the same numbers as :func:`structure_point`."""
    X = np.atleast_2d(np.asarray(X, dtype=float))
    col = list(names).index
    return np.stack([X[:, col("log_M")], X[:, col("log_F")], X[:, col("log_a_total")] * math.log(10)], axis=1)


def slowdown_table(points: np.ndarray, latencies: np.ndarray, variants: Sequence[str], reference: str,
          config_ids: Sequence[str]) -> dict:
    """The JSON table training stores: ``points`` (n, 3) structure points (``SLOWDOWN_AXES``), ``latencies``
    (n, variants) seconds (NaN: did not run), each variant's ratio to ``reference``'s column."""
    ref = latencies[:, list(variants).index(reference)]
    return {"reference": reference, "axes": list(SLOWDOWN_AXES), "configs": list(config_ids),
            "points": np.round(points, 5).tolist(),
            "ratios": {v: [None if not np.isfinite(r) else round(float(r), 4) for r in latencies[:, j] / ref]
                       for j, v in enumerate(variants) if v != reference}}


def predict_slowdown(stored: Optional[Mapping], model: Any, variant: str) -> Optional[Slowdown]:
    """``variant``'s predicted slowdown against the table's reference on ``model``; None without a table or
    without ratios of ``variant`` on enough training models."""
    if not stored or variant not in stored.get("ratios", {}):
        return None
    ratios = np.array([np.nan if r is None else r for r in stored["ratios"][variant]], dtype=float)
    points = np.asarray(stored["points"], dtype=float)
    ran = np.isfinite(ratios)
    if ran.sum() < SLOWDOWN_NEIGHBOURS:
        return None
    distance = np.linalg.norm(points[ran] - np.asarray(structure_point(model)), axis=1)
    nearest = np.argsort(distance, kind="stable")[:SLOWDOWN_NEIGHBOURS]
    seen = ratios[ran][nearest]
    ids = np.asarray(stored["configs"])[ran][nearest]
    return Slowdown(variant, stored["reference"], float(seen.min()), tuple(str(i) for i in ids),
                    tuple(float(r) for r in seen))


# ---- the ranking --------------------------------------------------------------------------------------------------
DEFAULT_MODEL_DIR = Path(__file__).resolve().parent / "models"
FALLBACK = "baseline"
#: The budget when the caller gives none.
DEFAULT_BUDGET = MemoryBudget.from_gib(2.0)


def model_folder(model_dir: Optional[os.PathLike]) -> Path:
    """The folder the ranking models are read from: ``model_dir``, else ``$BAYES_INFER_AUTOTUNE_DIR``, else the
    shipped ``DEFAULT_MODEL_DIR``."""
    if model_dir is not None:
        return Path(model_dir)
    env = os.environ.get("BAYES_INFER_AUTOTUNE_DIR")
    return Path(env) if env else DEFAULT_MODEL_DIR


def model_tags(backend: str, numba: Optional[bool] = None) -> tuple[str, ...]:
    """Model names to try, in order (``numba``: whether it is installed; default: look). Where numba is not
    installed, each backend's model trained without the native variants (``<backend>_portable``) comes before its
    full model, whose ranking below the native winner was learned from few rows. A device other than the CPU without
    a model of its own ranks the JAX variants by the CPU's portable model (the CPU's native variant does not run
    there)."""
    if backend != "cpu":
        return (f"{backend}_portable", backend, "cpu_portable", "cpu")
    if numba if numba is not None else numba_available():
        return ("cpu",)
    return ("cpu_portable", "cpu")


def _tags(backend: str) -> tuple[str, ...]:
    return model_tags(backend)


@dataclass(frozen=True)
class TrainedModel:
    """A ranking model of one algorithm: its file's tag, its meta entry, and the classifier (None for a model whose
    training data had one winner everywhere: ``entry["constant"]``, no choice to rank)."""

    tag: str
    entry: dict
    forest: Optional[NumpyForest]

    @property
    def constant(self) -> Optional[str]:
        return self.entry.get("constant")


@lru_cache(maxsize=32)
def _load(model_dir: str, tags: tuple[str, ...], algorithm: str) -> Optional[TrainedModel]:
    """The first of the models ``tags`` (``_tags``) that has ``algorithm`` and today's features."""
    d = Path(model_dir)
    for tag in tags:
        meta_path = d / f"{tag}_meta.json"
        if not meta_path.is_file():
            continue
        meta = json.loads(meta_path.read_text())
        entry = meta.get("algorithms", {}).get(algorithm)
        if entry is None:
            continue
        if meta.get("feature_names") != feature_names():
            continue  # trained on another feature set: unusable
        if "constant" in entry:
            return TrainedModel(tag, entry, None)
        path = d / f"{tag}_{algorithm}.json"
        if path.is_file():
            return TrainedModel(tag, entry, NumpyForest.load(path))
    return None


def trained_model(algorithm: str, backend: str, model_dir: Optional[os.PathLike] = None) -> Optional[TrainedModel]:
    """The ranking model ``backend`` reads for ``algorithm`` here (None: no model file has it)."""
    return _load(str(model_folder(model_dir)), _tags(backend), algorithm)


def model_variants(algorithm: str, backend: str, model_dir: Optional[os.PathLike] = None) -> tuple[str, ...]:
    """The variants the ranking model of ``backend`` was trained on (empty without a model)."""
    loaded = trained_model(algorithm, backend, model_dir)
    if loaded is None:
        return ()
    entry = loaded.entry
    return tuple(entry.get("variants") or entry.get("classes") or [entry.get("constant")])


def _backend() -> str:
    return jax.default_backend()


def _registered() -> tuple[str, ...]:
    return tuple(inference.VARIANTS)


def infeasible(variant: str, model: Any, memory_budget: MemoryBudget = DEFAULT_BUDGET, itemsize: int = ITEMSIZE,
               estimates: Optional[dict] = None) -> str:
    """Why ``variant`` cannot run ``model`` here ("" when it can): not registered, not buildable here (a native
    engine needs its library), or (by the structure-only estimate) over the memory budget."""
    if variant not in _registered():
        return "not a registered variant"
    if variant in NATIVE_VARIANTS and not NATIVE_VARIANTS[variant].available():
        return f"{variant} cannot be built here (its library is not installed)"
    return "" if variant == FALLBACK else memory_budget.refusal(variant, model, itemsize, estimates)


@dataclass(frozen=True)
class Ranking:
    """The classifier's ranking of the feasible variants (``ranked``: (name, probability), best first, baseline last
    when unscored) and the variants it left out with the reason (``dropped``: the size guard, the memory budget, not
    buildable here)."""

    ranked: list[tuple[str, float]]
    dropped: dict[str, str] = field(default_factory=dict)


def _guard_reason(x: np.ndarray, variant: str, spec: dict) -> str:
    padded = float(padding(x, [variant])[0, 0])
    ceiling = spec.get("ceilings", {}).get(variant, 0.0)
    return (f"size guard: padded {10 ** padded:.3g}x the dense A arrays, over {spec.get('margin', GUARD_MARGIN):g} "
            f"times the most padding at which it came within {GUARD_TOLERANCE:.0%} of the fastest in training "
            f"({10 ** ceiling:.3g}x): predicted to lose by a wide margin")


def ranking(algorithm: str, model: Any, horizon: int = 1, num_iter: int = 16, backend: Optional[str] = None,
            memory_budget: MemoryBudget = DEFAULT_BUDGET, itemsize: int = ITEMSIZE,
            model_dir: Optional[os.PathLike] = None) -> Ranking:
    """The feasible variants with the classifier's probability, best first, and those left out with the reason.

    Feasible: registered, buildable here, within the memory budget, and allowed by the size guard stored with the
    model. ``horizon``: the window's length, 1 for an algorithm without a window (its models were trained at 1;
    ``EngineConfig.ranked_horizon``, :func:`rank_variants`).
    """
    backend = backend or _backend()
    loaded = trained_model(algorithm, backend, model_dir)
    est = size_estimates(model)
    scored: list[tuple[str, float]] = []
    dropped: dict[str, str] = {}
    if loaded is not None:
        entry = loaded.entry
        f = structure_features(model, horizon, num_iter, backend)
        x = np.array([[f[k] for k in feature_names()]], dtype=np.float32)
        # a training set with one winning class ships a constant
        classes, proba = ([entry["constant"]], [1.0]) if loaded.forest is None else (
            entry["classes"], loaded.forest.predict_proba(x)[0].tolist())
        spec = entry.get("size_guard") or {}
        ok = guard_allowed(x, classes, spec.get("ceilings"), spec.get("margin", GUARD_MARGIN))[0]
        dropped.update({v: _guard_reason(x, v, spec) for v, keep in zip(classes, ok) if not keep})
        scored = sorted(((v, p) for v, p, keep in zip(classes, proba, ok) if keep), key=lambda t: -t[1])
    ranked = []
    for v, p in scored:
        why = infeasible(v, model, memory_budget, itemsize, est)
        if why:
            dropped[v] = why
        else:
            ranked.append((v, p))
    if FALLBACK not in [v for v, _ in ranked]:
        ranked.append((FALLBACK, 0.0))
    return Ranking(ranked, dropped)


def rank_variants(algorithm: str, model: Any, horizon: int = 1, num_iter: int = 16, backend: Optional[str] = None,
                  memory_budget: MemoryBudget = DEFAULT_BUDGET, itemsize: int = ITEMSIZE,
                  model_dir: Optional[os.PathLike] = None) -> list[tuple[str, float]]:
    """Feasible variants with the classifier's probability, best first (baseline last when unscored):
    :func:`ranking`'s ``ranked`` (``horizon`` counts only for an algorithm with a window)."""
    horizon = horizon if algorithm_spec(algorithm).window else 1
    return ranking(algorithm, model, horizon, num_iter, backend, memory_budget, itemsize, model_dir).ranked


# ---- a device's candidates -----------------------------------------------------------------------------------------
class RankedSettings(Protocol):
    """The settings a device's candidates are read from (``decision.EngineConfig`` has them)."""

    algorithm: str
    ranked_horizon: int
    num_iter: int
    autotune_verify_top_k: int


@dataclass
class DeviceCandidates:
    """One device's candidates: ``order[0]`` starts when this is the first device, the rest are verified."""

    order: list[str]
    skipped: dict[str, str]
    reason: str


def untrained_natives(platform: str, algorithm: str, model_dir: Any) -> list[str]:
    """The single-dispatch engines of ``platform`` that can be built here and that its ranking model does not know."""
    known = model_variants(algorithm, platform, model_dir)
    return [v for v, cls in NATIVE_VARIANTS.items() if cls.device == platform and cls.available() and v not in known]


def device_candidates(model: Any, config: RankedSettings, budget: MemoryBudget, platform: str, native_only: bool,
                      model_dir: Any) -> DeviceCandidates:
    """``variant: auto``'s candidates on ``platform`` (``decision``'s docstring: the constant winner, or the
    ranking), at most k + natives + baseline verified."""
    k = max(int(config.autotune_verify_top_k), 0)
    trained = trained_model(config.algorithm, platform, model_dir)
    natives = untrained_natives(platform, config.algorithm, model_dir)
    constant = trained.constant if trained is not None else None
    if native_only:  # numba's CUDA target only: its native engines are all that run there
        return DeviceCandidates(natives, {}, f"the only engines {platform} runs here")
    if constant is not None and not infeasible(constant, model, budget, ITEMSIZE):
        reason = (f"the fastest or tied on all {trained.entry.get('configs', '?')} training models of this install "
                  f"({trained.tag}_meta.json)")
        order, skipped = [constant] + natives, {}
        slowdown = predict_slowdown(trained.entry.get("slowdowns"), model, FALLBACK)
        if slowdown is not None and slowdown.wide:
            skipped[FALLBACK] = slowdown.describe()
        elif constant != FALLBACK:
            order.append(FALLBACK)
        return DeviceCandidates(order, skipped, reason)
    rank = ranking(config.algorithm, model, config.ranked_horizon, config.num_iter, backend=platform,
                   memory_budget=budget, itemsize=ITEMSIZE, model_dir=model_dir)
    ranked = [v for v, _ in rank.ranked if platform in VARIANT_PLATFORMS[v]]
    skipped = dict(rank.dropped)
    top = ranked[:max(k, 1)]
    why = f"not among the {k} best predicted by the ranking model" if k else "autotune_verify_top_k is 0: not verified"
    skipped.update({v: why for v in ranked[len(top):] if v != FALLBACK})
    reason = (f"the ranking model's first pick ({trained.tag})" if trained is not None
              else "no ranking model for this device: the rule")
    return DeviceCandidates(list(dict.fromkeys(top + natives + [FALLBACK])), skipped, reason)


def engine_call(engine: Engine, algorithm: str, horizon: int, agents: int = 1, evidence: bool = False
                ) -> Callable[[], Any]:
    """A zero-argument call of what the node runs each tick for ``agents`` agents (a batched engine's batch), results
    on the host: the engine's stepper for FPI (beliefs and the next prior in one dispatch; ``evidence``: with the
    surprise, the gates and the free energy, no gate refusing), ``run_packed`` over a ``horizon`` window for VMP/MMP.
    One-hot observations of level 0 and a uniform prior in the engine's dtype; the arguments are made once."""
    layout = engine.layout
    window = algorithm_spec(algorithm).window
    b = engine.batch_size if engine.batched else max(int(agents), 1)
    T = horizon if window else 1
    lead = (b, T) if window else (b,)
    dtype = np.dtype(engine.dtype)
    obs = np.zeros(lead + (layout.obs_size,), dtype=dtype)
    for off in layout.obs_offsets[:-1]:
        obs[..., off] = 1.0
    prior = np.tile(np.concatenate([np.full(n, 1.0 / n, dtype=dtype) for n in layout.num_states]), (b, 1))
    if not window:
        control = np.zeros((b, len(layout.num_states)), dtype=np.int32)
        gates = np.full(len(layout.num_obs), np.inf, dtype) if evidence else None
        return engine.stepper(obs, prior, control, gates)
    actions = np.zeros((b, T - 1, len(layout.num_states)), dtype=np.int32)
    if not engine.batched:  # an unbatched engine's window: one agent's
        obs, prior, actions = obs[0], prior[0], actions[0]
    return lambda: np.asarray(engine.run_packed(obs, prior, actions))
