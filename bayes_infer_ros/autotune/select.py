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

``verify_top_k=k`` (beyond the paper) builds and times the top k candidates on this device (packed API,
a fraction of a second each after compilation) and returns the fastest.
"""
from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

from . import guard
from .features import feature_names, peak_elements, size_estimates, structure_features
from .forest import NumpyForest

DEFAULT_MODEL_DIR = Path(__file__).resolve().parent / "models"
FALLBACK = "baseline"


def _model_dir(model_dir: Optional[os.PathLike]) -> Path:
    if model_dir is not None:
        return Path(model_dir)
    env = os.environ.get("BAYES_INFER_AUTOTUNE_DIR")
    return Path(env) if env else DEFAULT_MODEL_DIR


@lru_cache(maxsize=32)
def _load(model_dir: str, backend: str, algorithm: str) -> Optional[tuple[dict, Optional[NumpyForest]]]:
    d = Path(model_dir)
    for tag in dict.fromkeys((backend, "cpu")):
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
    try:
        import jax

        return jax.default_backend()
    except Exception:  # pragma: no cover - jax always present in this package
        return "cpu"


def _registered() -> tuple[str, ...]:
    try:
        from bayes_infer_ros.inference import VARIANTS

        return tuple(VARIANTS)
    except ImportError:  # pragma: no cover
        return (FALLBACK,)


def feasible(variant: str, model: Any, memory_budget_gb: float = 2.0, itemsize: int = 4,
             estimates: Optional[dict] = None) -> bool:
    """Registered and (by the structure-only estimate) within the memory budget."""
    if variant not in _registered():
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
    loaded = _load(str(_model_dir(model_dir)), backend, algorithm)
    est = size_estimates(model)
    ranked: list[tuple[str, float]] = []
    if loaded is not None:
        entry, forest = loaded
        if forest is None:
            ranked = [(entry["constant"], 1.0)]
        else:
            f = structure_features(model, horizon, num_iter, backend)
            x = np.array([[f[k] for k in feature_names()]], dtype=np.float32)
            proba = forest.predict_proba(x)[0]
            spec = entry.get("size_guard") or {}
            ok = guard.allowed(x, entry["classes"], spec.get("ceilings"), spec.get("margin", guard.MARGIN))[0]
            ranked = sorted(((v, p) for v, p, keep in zip(entry["classes"], proba.tolist(), ok) if keep),
                            key=lambda t: -t[1])
    out = [(v, p) for v, p in ranked if feasible(v, model, memory_budget_gb, itemsize, est)]
    if FALLBACK not in [v for v, _ in out]:
        out.append((FALLBACK, 0.0))
    return out


def _try_build(algorithm: str, model: Any, variant: str, num_iter: int):
    from bayes_infer_ros.inference import build_inference

    return build_inference(algorithm, model.A, model.A_dependencies, model.B, model.B_dependencies,
                           variant=variant, num_iter=num_iter)


def time_engine(engine: Any, algorithm: str, horizon: int, repeats: int = 20) -> float:
    """Steady-state median seconds of the packed call on zero observations and a uniform prior."""
    from bayes_infer_ros.bench.timing import time_callable

    layout = engine.layout
    T = 1 if algorithm == "fpi" else horizon
    lead = () if algorithm == "fpi" else (T,)
    obs = np.zeros(lead + (layout.obs_size,), dtype=np.float32)
    for i, off in enumerate(layout.obs_offsets[:-1]):
        obs[..., off] = 1.0
    prior = np.concatenate([np.full(n, 1.0 / n, dtype=np.float32) for n in layout.num_states])
    args: tuple = (obs, prior)
    if algorithm != "fpi":
        args += (np.zeros((T - 1, len(layout.num_states)), dtype=np.int32),)
    return time_callable(engine.run_packed, *args, warmup=2, min_repeats=repeats, max_repeats=repeats,
                         min_time_s=0.0, max_time_s=2.0).median_s


def verify_engines(algorithm: str, model: Any, candidates: Sequence[str], horizon: int = 1, num_iter: int = 16,
                   build: Optional[Callable[[str], Any]] = None) -> tuple[str, Any, dict[str, float]]:
    """Build and time each candidate on this device: (fastest, its engine, {variant: seconds}).

    ``build(variant) -> engine`` builds a candidate (default: ``build_inference`` with ``num_iter``); pass the
    caller's own builder (e.g. with ``tau``) to keep the winner's engine instead of building it again.
    Candidates that refuse the model or run out of memory are timed as inf and skipped; when none runs, the
    answer is (``"baseline"``, None, timings).
    """
    build = build or (lambda v: _try_build(algorithm, model, v, num_iter))
    timings: dict[str, float] = {}
    best, best_engine = FALLBACK, None
    for v in candidates:
        try:
            engine = build(v)
            timings[v] = time_engine(engine, algorithm, horizon)
        except (MemoryError, ValueError):  # VariantUnsupported is a ValueError
            timings[v] = float("inf")
            continue
        if best_engine is None or timings[v] < timings[best]:
            best, best_engine = v, engine
    return best, best_engine, timings


def verify_variants(algorithm: str, model: Any, candidates: Sequence[str], horizon: int = 1, num_iter: int = 16
                    ) -> tuple[str, dict[str, float]]:
    """Build and time each candidate on this device; (fastest, {variant: seconds}). Failures are skipped."""
    best, _, timings = verify_engines(algorithm, model, candidates, horizon, num_iter)
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
    if verify_top_k and verify_top_k > 0:
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
