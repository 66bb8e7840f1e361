"""The autotuner's ranking, for a device where there is a choice (a GPU, a CPU without numba): the variants predicted
fastest for a model on a device platform, in milliseconds, and the ones left out with the reason.

    rank = ranking("mmp", model, horizon=5, num_iter=16, backend="gpu")
    rank.ranked     # [("fused_dense", 0.61), ..., ("baseline", 0.0)]
    rank.dropped    # {"end_to_end": "size guard: padded ...", ...}

Guarantees: every ranked name is in ``VARIANTS``, buildable here (a native engine needs its library), within the
memory budget by the structure-only estimate (``budget.MemoryBudget``) and allowed by the model's size guard
(``guard.py``: never a variant padded far beyond any size at which it was ever nearly the fastest in training);
``baseline``, which runs every model, comes last when the model did not score it. A device whose training data had
one winner everywhere (``TrainedModel.constant``: the CPU with numba) is not ranked: ``decision`` starts that winner.
What runs is decided by ``decision`` (devices, the start, the verify step, the fallback).

Model files: ``<model_dir>/<backend>_<algorithm>.json`` (XGBoost JSON) and ``<backend>_meta.json``, by default
the ones shipped in ``bayes_infer_ros/autotune/models``; override with ``model_dir=`` or the environment
variable ``BAYES_INFER_AUTOTUNE_DIR`` (a retrained model for your own device, see docs/autotune.md). A
backend without its own model uses the CPU model. Evaluation is pure numpy (``forest.NumpyForest``): no
xgboost import on the robot.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Optional

import jax
import numpy as np

from .. import inference
from ..inference import Engine
from ..inference.native import numba_available
from ..inference.algorithm_specs import algorithm_spec
from ..inference.registry import NATIVE_VARIANTS
from . import guard
from .budget import ITEMSIZE, MemoryBudget
from .features import feature_names, size_estimates, structure_features
from .forest import NumpyForest

DEFAULT_MODEL_DIR = Path(__file__).resolve().parent / "models"
FALLBACK = "baseline"
#: The budget when the caller gives none.
DEFAULT_BUDGET = MemoryBudget.from_gib(2.0)


def _model_dir(model_dir: Optional[os.PathLike]) -> Path:
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
    return _load(str(_model_dir(model_dir)), _tags(backend), algorithm)


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
    padding = float(guard.padding(x, [variant])[0, 0])
    ceiling = spec.get("ceilings", {}).get(variant, 0.0)
    return (f"size guard: padded {10 ** padding:.3g}x the dense A arrays, over {spec.get('margin', guard.MARGIN):g} "
            f"times the most padding at which it came within {guard.TOLERANCE:.0%} of the fastest in training "
            f"({10 ** ceiling:.3g}x): predicted to lose by a wide margin")


def ranking(algorithm: str, model: Any, horizon: int = 1, num_iter: int = 16, backend: Optional[str] = None,
            memory_budget: MemoryBudget = DEFAULT_BUDGET, itemsize: int = ITEMSIZE,
            model_dir: Optional[os.PathLike] = None) -> Ranking:
    """The feasible variants with the classifier's probability, best first, and those left out with the reason.

    Feasible: registered, buildable here, within the memory budget, and allowed by the size guard stored with the
    model.
    """
    backend = backend or _backend()
    if not algorithm_spec(algorithm).window:
        horizon = 1
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
        ok = guard.allowed(x, classes, spec.get("ceilings"), spec.get("margin", guard.MARGIN))[0]
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
    :func:`ranking`'s ``ranked``."""
    return ranking(algorithm, model, horizon, num_iter, backend, memory_budget, itemsize, model_dir).ranked


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
