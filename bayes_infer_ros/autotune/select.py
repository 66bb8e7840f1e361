"""``select_variant``: the fastest variant for a model, predicted from its structure in milliseconds.

    from bayes_infer_ros.autotune import select_variant
    name = select_variant("mmp", model, horizon=5, num_iter=16)     # e.g. "clustered_hybrid_block"

Guarantees: the answer is a name in ``VARIANTS`` whose prepared arrays fit ``memory_budget_gb`` by the
structure-only estimate and that the model's size guard allows (``guard.py``: never a variant padded far
beyond any size at which it was ever nearly the fastest in training); with ``check_build=True`` the candidate is also built (and the next one tried when it
raises ``VariantUnsupported`` / ``MemoryError``). Anything missing (no trained model for the backend, a
variant not registered, nothing fits) falls back to ``"baseline"``, which runs every model.

Model files: ``<model_dir>/<backend>_<algorithm>.json`` (XGBoost JSON) and ``<backend>_meta.json``, by default
the ones shipped in ``bayes_infer_ros/autotune/models``; override with ``model_dir=`` or the environment
variable ``BAYES_INFER_AUTOTUNE_DIR`` (a retrained model for your own device, see docs/autotune.md). A
backend without its own model uses the CPU model. Evaluation is pure numpy (``forest.NumpyForest``): no
xgboost import on the robot.

``verify_top_k=k`` (beyond the paper) builds the top k candidates and ``baseline`` and times them on this device,
round-robin (``timing.time_round_robin``, the call the node makes per tick; about a second after compilation),
and returns the fastest: never a variant measured slower than baseline. The node's ``variant: auto`` does this
with k = 3 by default.
"""
from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import jax
import numpy as np

from .. import inference
from ..inference.native import numba_available
from ..inference.registry import NATIVE_VARIANTS
from . import guard
from .features import feature_names, peak_elements, size_estimates, structure_features
from .forest import NumpyForest
from .timing import time_round_robin

DEFAULT_MODEL_DIR = Path(__file__).resolve().parent / "models"
FALLBACK = "baseline"
#: The verify step's round-robin: at most this many rounds, stopping after this many seconds of timing.
VERIFY_ROUNDS = 40
VERIFY_MAX_TIME_S = 1.0


def _model_dir(model_dir: Optional[os.PathLike]) -> Path:
    if model_dir is not None:
        return Path(model_dir)
    env = os.environ.get("BAYES_INFER_AUTOTUNE_DIR")
    return Path(env) if env else DEFAULT_MODEL_DIR


def _tags(backend: str) -> tuple[str, ...]:
    """Model names to try, in order. Where numba is not installed, each backend's model trained without the native
    variants (``<backend>_portable``) comes before its full model, whose ranking below the native winner was
    learned from few rows."""
    backends = tuple(dict.fromkeys((backend, "cpu")))
    if numba_available():
        return backends
    return tuple(name for b in backends for name in (f"{b}_portable", b))


@lru_cache(maxsize=32)
def _load(model_dir: str, tags: tuple[str, ...], algorithm: str) -> Optional[tuple[dict, Optional[NumpyForest]]]:
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
            return entry, None
        path = d / f"{tag}_{algorithm}.json"
        if path.is_file():
            return entry, NumpyForest.load(path)
    return None


def _backend() -> str:
    return jax.default_backend()


def _registered() -> tuple[str, ...]:
    return tuple(inference.VARIANTS)


def feasible(variant: str, model: Any, memory_budget_gb: float = 2.0, itemsize: int = 4,
             estimates: Optional[dict] = None) -> bool:
    """Registered, buildable here (a native engine needs numba) and (by the structure-only estimate) within the
    memory budget."""
    if variant not in _registered() or (variant in NATIVE_VARIANTS and not numba_available()):
        return False
    if variant == FALLBACK:
        return True
    est = estimates if estimates is not None else size_estimates(model)
    return peak_elements(variant, est) * itemsize <= memory_budget_gb * 2**30


def rank_variants(algorithm: str, model: Any, horizon: int = 1, num_iter: int = 16, backend: Optional[str] = None,
                  memory_budget_gb: float = 2.0, itemsize: int = 4, model_dir: Optional[os.PathLike] = None
                  ) -> list[tuple[str, float]]:
    """Feasible variants with the classifier's probability, best first (baseline last when unscored).

    Feasible: registered, within the memory budget, and allowed by the size guard stored with the model.
    """
    backend = backend or _backend()
    if algorithm == "fpi":
        horizon = 1
    loaded = _load(str(_model_dir(model_dir)), _tags(backend), algorithm)
    est = size_estimates(model)
    ranked: list[tuple[str, float]] = []
    if loaded is not None:
        entry, forest = loaded
        f = structure_features(model, horizon, num_iter, backend)
        x = np.array([[f[k] for k in feature_names()]], dtype=np.float32)
        # a training set with one winning class ships a constant
        classes, proba = ([entry["constant"]], [1.0]) if forest is None else (entry["classes"],
                                                                             forest.predict_proba(x)[0].tolist())
        spec = entry.get("size_guard") or {}
        ok = guard.allowed(x, classes, spec.get("ceilings"), spec.get("margin", guard.MARGIN))[0]
        ranked = sorted(((v, p) for v, p, keep in zip(classes, proba, ok) if keep), key=lambda t: -t[1])
    out = [(v, p) for v, p in ranked if feasible(v, model, memory_budget_gb, itemsize, est)]
    if FALLBACK not in [v for v, _ in out]:
        out.append((FALLBACK, 0.0))
    return out


def _try_build(algorithm: str, model: Any, variant: str, num_iter: int):
    return inference.build_inference(algorithm, model.A, model.A_dependencies, model.B, model.B_dependencies,
                           variant=variant, num_iter=num_iter)


def engine_call(engine: Any, algorithm: str, horizon: int) -> Callable[[], Any]:
    """A zero-argument call of what the node runs each tick: ``engine.tick`` for FPI (beliefs and the next
    prior in one dispatch), ``run_packed`` over a ``horizon`` window for VMP/MMP. One-hot observations of
    level 0 and a uniform prior; the arguments are made once."""
    layout = engine.layout
    T = 1 if algorithm == "fpi" else horizon
    lead = () if algorithm == "fpi" else (T,)
    obs = np.zeros(lead + (layout.obs_size,), dtype=np.float32)
    for off in layout.obs_offsets[:-1]:
        obs[..., off] = 1.0
    prior = np.concatenate([np.full(n, 1.0 / n, dtype=np.float32) for n in layout.num_states])
    if algorithm == "fpi":
        action = np.zeros(len(layout.num_states), dtype=np.int32)
        return lambda: engine.tick(obs, prior, action)
    actions = np.zeros((T - 1, len(layout.num_states)), dtype=np.int32)
    return lambda: engine.run_packed(obs, prior, actions)


def verify_engines(algorithm: str, model: Any, candidates: Sequence[str], horizon: int = 1, num_iter: int = 16,
                   build: Optional[Callable[[str], Any]] = None, include_baseline: bool = True,
                   ) -> tuple[str, Any, dict[str, float]]:
    """Build the candidates and time them on this device, round-robin: (fastest, its engine, {variant: s}).

    ``baseline`` is always among the timed candidates (unless ``include_baseline=False``), so the answer is
    never a variant measured slower than baseline here. Seconds are ``timing.time_round_robin``'s statistic
    (a low percentile over rounds) of the call the node makes per tick (``engine_call``).
    ``build(variant) -> engine`` builds a candidate (default: ``build_inference`` with ``num_iter``); pass the
    caller's own builder (e.g. with ``tau``) to keep the winner's engine instead of building it again.
    Candidates that refuse the model or run out of memory are timed as inf; when none runs, the answer is
    (``"baseline"``, None, timings).
    """
    build = build or (lambda v: _try_build(algorithm, model, v, num_iter))
    names = list(dict.fromkeys(candidates))
    if include_baseline and FALLBACK not in names:
        names.append(FALLBACK)
    engines: dict[str, Any] = {}
    calls: dict[str, Callable[[], Any]] = {}
    timings: dict[str, float] = {}
    for v in names:
        try:
            engines[v] = build(v)
            calls[v] = engine_call(engines[v], algorithm, horizon)
        except (MemoryError, ValueError):  # VariantUnsupported is a ValueError
            timings[v] = float("inf")
    for v, t in time_round_robin(calls, rounds=VERIFY_ROUNDS, max_time_s=VERIFY_MAX_TIME_S).items():
        timings[v] = t.time_s
    timings = {v: timings[v] for v in names}
    if not calls:
        return FALLBACK, None, timings
    best = min(calls, key=lambda v: timings[v])
    return best, engines[best], timings


def verify_variants(algorithm: str, model: Any, candidates: Sequence[str], horizon: int = 1, num_iter: int = 16,
                    include_baseline: bool = True) -> tuple[str, dict[str, float]]:
    """``verify_engines`` without the engine: (fastest, {variant: seconds})."""
    best, _, timings = verify_engines(algorithm, model, candidates, horizon, num_iter,
                                      include_baseline=include_baseline)
    return best, timings


def select_variant(algorithm: str, model: Any, horizon: int = 1, num_iter: int = 16, *,
                   backend: Optional[str] = None, memory_budget_gb: float = 2.0, itemsize: int = 4,
                   model_dir: Optional[os.PathLike] = None, check_build: bool = False, verify_top_k: int = 0) -> str:
    """The variant predicted fastest for ``algorithm`` on ``model`` (a GenerativeModel or any structure).

    Never returns a variant that cannot run the model (see the module docstring); ``"baseline"`` otherwise.
    ``check_build`` and ``verify_top_k`` need a GenerativeModel with arrays.
    """
    ranked = rank_variants(algorithm, model, horizon, num_iter, backend, memory_budget_gb, itemsize, model_dir)
    names = [v for v, _ in ranked]
    if verify_top_k and verify_top_k > 0:  # baseline is timed too: the answer is never slower than it
        best, _ = verify_variants(algorithm, model, names[:verify_top_k], horizon, num_iter)
        return best
    if check_build:
        for v in names:
            if v == FALLBACK:
                return v
            try:
                _try_build(algorithm, model, v, num_iter)
                return v
            except (MemoryError, ValueError):
                continue
        return FALLBACK
    return names[0]
