"""Train the autotuner from benchmark CSVs (``python -m lab autotune-train``).

Per algorithm (fpi, vmp, mmp), one classifier maps structure features to the fastest variant. The protocol
follows Section V of the paper:

- outer 80/20 cross-validation (5 folds over configurations, shuffled with a fixed seed);
- inside each training split, model selection by randomized search over the paper's hyperparameter table
  (60 draws) on an internal 80/20 split, scored by regret;
- the regret metric: mean over test configurations of latency(selected) / latency(oracle best) - 1, where the
  selected variant is the feasible class with the highest classifier score (a class the classifier ranks
  first but that could not run the configuration falls through to the next, as ``select_variant`` does);
- XGBoost (shipped) and a random forest (for comparison), plus two references: the single best fixed variant
  (chosen on the training split) and always-``baseline``;
- beyond the paper, the size guard (``autotune/select.py``): a variant padded far beyond any size at which it was ever
  within 10% of the fastest on the training split is never picked. Regret is reported with and without it;
  the shipped selector uses it;
- beyond the paper, the verify step: time the top-k ranked variants and ``baseline`` on the device and keep the
  fastest. Offline it is simulated with the sweep's own latencies (the oracle restricted to top k + baseline);
- labels that respect noise: variants within ``TIE_TOLERANCE`` of the fastest are ties, and the label is the
  tied variant that is most often within the tolerance over the training data (``baseline`` first among
  equals), so noise does not scatter one structure's label over equivalent variants;
- cost weighting: each configuration is weighted by what a wrong pick costs there (the mean regret of the
  other variants, capped), and the weighted fit is shipped when its out-of-fold regret is lower.

Outputs: ``<out-dir>/<backend>_<algorithm>.json`` (XGBoost's JSON, read at run time by a numpy evaluator),
``<out-dir>/<backend>_meta.json`` (classes, feature names, hyperparameters, CV regret), and
``autotune_training_<backend>.csv`` in ``--report-dir`` (else ``<out-dir>``) (one row per configuration and algorithm: features, per-variant latency,
label), which is also a valid input to retrain from (``--from-training-csv``).
"""
from __future__ import annotations

import dataclasses

import argparse
import csv
import json
import math
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from bayes_infer_ros.autotune import select
from bayes_infer_ros.autotune.select import DEFAULT_MODEL_DIR, feature_names, structure_features
from bayes_infer_ros.inference import VARIANTS
from lab.generator import DEFAULT_CACHE, generate_specs, read_index
from lab.harness import PYMDP, read_rows

N_ITER = 60
FOLDS = 5
TOP_K = 3
#: Variants within this relative distance of the fastest are ties (the round-robin timing's run-to-run
#: spread on this project's CPU, benchmarks/noise_floor_engine_cpu.txt).
TIE_TOLERANCE = 0.05
#: Cap on one configuration's cost weight (a variant 1000x slower must not make one row decide the fit).
MAX_COST_WEIGHT = 10.0

# The paper's hyperparameter table (Section V).
RF_SPACE = {
    "n_estimators": [300, 500, 700, 900, 1200],
    "max_depth": [6, 8, 10, 12, 16, 20, None],
    "min_samples_split": [2, 4, 6, 8, 10, 14, 18],
    "min_samples_leaf": [1, 2, 3, 4, 5, 7, 10],
    "max_features": ["sqrt", "log2", 0.3, 0.5],
    "max_samples": [None, 0.7, 0.8, 0.9],
    "min_impurity_decrease": [0.0, 1e-4, 5e-4, 1e-3],
    "class_weight": [None, "balanced"],
}
XGB_SPACE = {
    "n_estimators": [100, 300, 500, 700, 1000, 1500],
    "max_depth": [3, 4, 5, 6, 7, 8, 10],
    "learning_rate": [0.01, 0.03, 0.05, 0.1, 0.2],
    "subsample": [0.6, 0.7, 0.8, 0.9, 1.0],
    "colsample_bytree": [0.6, 0.7, 0.8, 0.9, 1.0],
    "min_child_weight": [1, 3, 5, 7, 10],
    "gamma": [0, 0.1, 0.2, 0.3, 0.5],
    "reg_alpha": [0, 0.01, 0.1, 1],
    "reg_lambda": [1, 2, 5, 10],
}


@dataclass
class Dataset:
    """One algorithm's training data. L[i, v]: latency of variant v on config i (NaN: did not run)."""

    algorithm: str
    config_ids: list[str]
    X: np.ndarray
    L: np.ndarray
    variants: list[str]
    pymdp: np.ndarray  # pymdp latency per config (NaN when missing)
    backend: str = "cpu"
    meta: dict = field(default_factory=dict)

    @property
    def labels(self) -> np.ndarray:
        return tie_labels(self.L, self.variants)

    @property
    def weights(self) -> np.ndarray:
        return cost_weights(self.L)


def without_variants(ds: Dataset, exclude: Sequence[str]) -> Dataset:
    """``ds`` with the columns of ``exclude`` dropped (as if those variants had never been registered)."""
    keep = [j for j, v in enumerate(ds.variants) if v not in set(exclude)]
    if len(keep) == len(ds.variants):
        return ds
    return dataclasses.replace(ds, L=ds.L[:, keep], variants=[ds.variants[j] for j in keep])


def tie_labels(L: np.ndarray, variants: Sequence[str], tol: float = TIE_TOLERANCE) -> np.ndarray:
    """Per row, among the variants within ``tol`` of the fastest, the one most often within ``tol`` over all
    rows (``baseline`` first when it is tied): one label per equivalence class instead of a noisy argmin."""
    best = np.nanmin(L, axis=1, keepdims=True)
    tied = np.isfinite(L) & (L <= best * (1.0 + tol))
    pref = tied.sum(axis=0).astype(np.float64)
    if "baseline" in variants:
        pref[list(variants).index("baseline")] = np.inf
    return np.argmax(np.where(tied, pref, -1.0), axis=1)


def cost_weights(L: np.ndarray) -> np.ndarray:
    """Per row, what a wrong pick costs: the mean regret of the variants that ran, capped at MAX_COST_WEIGHT,
    plus a floor so rows where everything ties still count."""
    best = np.nanmin(L, axis=1, keepdims=True)
    rel = np.where(np.isfinite(L), np.minimum(L / best - 1.0, MAX_COST_WEIGHT), np.nan)
    return 0.05 + np.nanmean(rel, axis=1)


# ---- data ---------------------------------------------------------------------------------------
def _float(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


def load_benchmark(paths: Sequence[Path], metric: str = "time_s", cache: Optional[Path] = None,
                   generator_seed: int = 0, variants: Optional[Sequence[str]] = None) -> dict[str, Dataset]:
    """Benchmark CSV rows -> one Dataset per algorithm.

    A configuration is kept for an algorithm when at least one variant ran and every variant has a row (any
    status): a case cut off by ``--max-minutes`` would otherwise make the best of a partial set look like
    the oracle. A rerun of the sweep resumes such configurations.
    """
    rows = read_rows(paths)
    try:
        specs = {s.config_id: s for s in read_index(cache or DEFAULT_CACHE)}
    except FileNotFoundError:
        specs = {s.config_id: s for s in generate_specs(seed=generator_seed)}
    order = list(VARIANTS)
    seen = {r["variant"] for r in rows if r["variant"] != PYMDP}
    all_variants = list(variants) if variants else [v for v in order if v in seen] + sorted(seen - set(order))
    out: dict[str, Dataset] = {}
    for alg in sorted({r["algorithm"] for r in rows}):
        lat: dict[str, dict[str, float]] = {}
        pym: dict[str, float] = {}
        settings: dict[str, tuple] = {}
        recorded: dict[str, set] = {}
        for r in rows:
            if r["algorithm"] != alg:
                continue
            recorded.setdefault(r["config_id"], set()).add(r["variant"])
            if r.get("status") != "ok":
                continue
            val = _float(r.get(metric))
            if not math.isfinite(val):
                val = _float(r.get("median_s"))
            if r["variant"] == PYMDP:
                pym[r["config_id"]] = val
                continue
            lat.setdefault(r["config_id"], {})[r["variant"]] = val
            settings[r["config_id"]] = (int(r["horizon"]), int(r["num_iter"]), r.get("backend", "cpu"))
        ids = sorted(c for c in lat if c in specs and any(math.isfinite(x) for x in lat[c].values())
                     and recorded[c] >= set(all_variants))
        if not ids:
            continue
        X = np.array([[structure_features(specs[c], *settings[c])[k] for k in feature_names()] for c in ids],
                     dtype=np.float32)
        L = np.array([[lat[c].get(v, np.nan) for v in all_variants] for c in ids], dtype=np.float64)
        P = np.array([pym.get(c, np.nan) for c in ids])
        out[alg] = Dataset(alg, ids, X, L, list(all_variants), P, backend=settings[ids[0]][2],
                           meta={"horizon": settings[ids[0]][0], "num_iter": settings[ids[0]][1]})
    return out


def write_training_csv(path: Path, datasets: dict[str, Dataset]) -> None:
    names = feature_names()
    with Path(path).open("w", newline="") as fh:
        w = csv.writer(fh)
        variants = next(iter(datasets.values())).variants if datasets else []
        w.writerow(["algorithm", "config_id", "backend", "label", "pymdp_s"] + names + [f"lat_{v}" for v in variants])
        for alg, ds in datasets.items():
            for i, c in enumerate(ds.config_ids):
                w.writerow([alg, c, ds.backend, ds.variants[ds.labels[i]], f"{ds.pymdp[i]:.9g}"]
                           + [f"{x:.6g}" for x in ds.X[i]] + [f"{x:.9g}" for x in ds.L[i]])


def read_training_csv(path: Path) -> dict[str, Dataset]:
    names = feature_names()
    with Path(path).open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    if not rows:
        return {}
    variants = [k[4:] for k in rows[0] if k.startswith("lat_")]
    out = {}
    for alg in sorted({r["algorithm"] for r in rows}):
        sub = [r for r in rows if r["algorithm"] == alg]
        X = np.array([[float(r[k]) for k in names] for r in sub], dtype=np.float32)
        L = np.array([[_float(r[f"lat_{v}"]) for v in variants] for r in sub])
        P = np.array([_float(r["pymdp_s"]) for r in sub])
        out[alg] = Dataset(alg, [r["config_id"] for r in sub], X, L, variants, P, backend=sub[0]["backend"],
                           meta={"horizon": int(X[0, names.index("horizon")]),
                                 "num_iter": int(X[0, names.index("num_iter")])})
    return out


# ---- selection and regret -----------------------------------------------------------------------
def _masked(scores: np.ndarray, L: np.ndarray, ok: Optional[np.ndarray]) -> np.ndarray:
    """Scores with variants that did not run (or that the guard drops) at -inf; a row left with nothing
    allowed keeps every variant that ran (the selector's fallback, ``baseline``, always runs)."""
    ran = np.isfinite(L)
    keep = ran if ok is None else ran & ok
    keep = np.where(keep.any(axis=1, keepdims=True), keep, ran)
    return np.where(keep, scores, -np.inf)


def choose(scores: np.ndarray, L: np.ndarray, ok: Optional[np.ndarray] = None) -> np.ndarray:
    """Per row, the highest-scoring variant that ran (finite latency) and that ``ok`` allows."""
    return np.argmax(_masked(scores, L, ok), axis=1)


def choose_verify(scores: np.ndarray, L: np.ndarray, k: int, ok: Optional[np.ndarray] = None,
                  always: Optional[int] = None) -> np.ndarray:
    """Per row, the fastest measured among the top-k allowed variants that ran, ranked by score, and the
    column ``always`` (baseline: the run-time verify step always times it)."""
    s = _masked(scores, L, ok)
    order = np.argsort(-s, axis=1, kind="stable")[:, :k]
    out = np.empty(len(L), dtype=np.int64)
    for i, cand in enumerate(order):
        cand = [c for c in cand if np.isfinite(s[i, c])]
        if always is not None and always not in cand and np.isfinite(L[i, always]):
            cand.append(always)
        out[i] = cand[int(np.argmin(L[i, cand]))]
    return out


def regrets(L: np.ndarray, chosen: np.ndarray) -> np.ndarray:
    best = np.nanmin(L, axis=1)
    return L[np.arange(len(L)), chosen] / best - 1.0


# ---- classifiers --------------------------------------------------------------------------------
class _Constant:
    """A classifier for a training split with one class."""

    def __init__(self, cls: int, n: int):
        self.cls, self.n = cls, n

    def scores(self, X: np.ndarray) -> np.ndarray:
        s = np.zeros((len(X), self.n))
        s[:, self.cls] = 1.0
        return s


class _Fitted:
    def __init__(self, model: Any, classes: np.ndarray, n: int):
        self.model, self.classes, self.n = model, classes, n

    def scores(self, X: np.ndarray) -> np.ndarray:
        p = self.model.predict_proba(X)
        s = np.full((len(X), self.n), -1.0)
        s[:, self.classes] = p
        return s


def make_classifier(kind: str, params: dict, seed: int, n_jobs: int = 1):
    if kind == "xgboost":
        import xgboost as xgb  # optional: training only (the robot evaluates the forest in numpy)

        return xgb.XGBClassifier(objective="multi:softprob", tree_method="hist", n_jobs=n_jobs,
                                 random_state=seed, **params)
    if kind == "rf":
        from sklearn.ensemble import RandomForestClassifier  # optional: training only

        params = dict(params)
        if params.get("max_samples") is not None:
            params["bootstrap"] = True
        return RandomForestClassifier(random_state=seed, n_jobs=n_jobs, **params)
    raise ValueError(f"unknown classifier {kind!r}")


def fit(kind: str, params: dict, X: np.ndarray, y: np.ndarray, n_classes: int, seed: int = 0, n_jobs: int = 1,
        weights: Optional[np.ndarray] = None):
    classes = np.unique(y)
    if len(classes) == 1:
        return _Constant(int(classes[0]), n_classes)
    enc = {c: i for i, c in enumerate(classes)}
    model = make_classifier(kind, params, seed, n_jobs)
    if kind == "xgboost" and len(classes) == 2:  # XGBClassifier sets num_class only for three classes or more
        model.set_params(num_class=2)
    model.fit(X, np.array([enc[c] for c in y]), sample_weight=weights)
    return _Fitted(model, classes, n_classes)


def sample_params(space: dict, n_iter: int, seed: int) -> list[dict]:
    from sklearn.model_selection import ParameterSampler  # optional: training only

    return list(ParameterSampler(space, n_iter=n_iter, random_state=seed))


def _draw_regret(kind: str, params: dict, X_tr, y_tr, X_val, L_val, n_classes: int, seed: int,
                 ok_val: Optional[np.ndarray] = None, w_tr: Optional[np.ndarray] = None) -> float:
    warnings.filterwarnings("ignore", category=UserWarning, module="sklearn")
    model = fit(kind, params, X_tr, y_tr, n_classes, seed, 1, w_tr)
    return float(regrets(L_val, choose(model.scores(X_val), L_val, ok_val)).mean())


def search(kind: str, X: np.ndarray, L: np.ndarray, n_iter: int = N_ITER, seed: int = 0, n_jobs: int = 1,
           variants: Optional[Sequence[str]] = None, weighted: bool = False) -> tuple[dict, float]:
    """Randomized search on an internal 80/20 split, scored by mean regret. Returns (params, regret).

    With ``variants`` (the columns of L) the size guard is fitted on the internal training part and applied
    to the validation part, as at run time. ``n_jobs`` > 1 evaluates draws in parallel processes.
    """
    space = XGB_SPACE if kind == "xgboost" else RF_SPACE
    draws = sample_params(space, n_iter, seed)
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(X))
    n_val = max(1, int(round(0.2 * len(X))))
    val, tr = idx[:n_val], idx[n_val:]
    if len(tr) < 2:
        return draws[0], float("nan")
    y = tie_labels(L, variants or [])
    ok_val = None if variants is None else select.guard_allowed(X[val], variants,
                                                                 select.fit_ceilings(X[tr], L[tr], variants))
    args = (X[tr], y[tr], X[val], L[val], L.shape[1], seed, ok_val, cost_weights(L[tr]) if weighted else None)
    if n_jobs > 1:
        from joblib import Parallel, delayed  # optional: training only (comes with scikit-learn)

        scores = Parallel(n_jobs=n_jobs)(delayed(_draw_regret)(kind, p, *args) for p in draws)
    else:
        scores = [_draw_regret(kind, p, *args) for p in draws]
    best = int(np.argmin(scores))  # first of equals: the draw order is seeded
    return draws[best], float(scores[best])


@dataclass
class CVResult:
    """Out-of-fold choices and their regret: ``chosen`` with the size guard (the shipped rule),
    ``chosen_noguard`` the paper's rule (top classifier score), ``chosen_verify`` guard + verify top-k."""

    kind: str
    regret: float
    regret_verify: float
    regret_median: float
    regret_verify_median: float
    chosen: np.ndarray
    chosen_verify: np.ndarray
    fold_params: list[dict]
    chosen_noguard: np.ndarray
    regret_noguard: float
    regret_noguard_median: float


def cross_validate(kind: str, ds: Dataset, n_iter: int = N_ITER, folds: int = FOLDS, seed: int = 0,
                   top_k: int = TOP_K, n_jobs: int = 1, weighted: bool = False) -> CVResult:
    """Outer k-fold (80/20 for k=5) with an inner randomized search; out-of-fold choices for every config.

    The size guard is fitted on each training split only, like the classifier.
    """
    n = len(ds.X)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    chosen = np.zeros(n, dtype=np.int64)
    chosen_v = np.zeros(n, dtype=np.int64)
    chosen_ng = np.zeros(n, dtype=np.int64)
    fold_params = []
    y = ds.labels
    always = ds.variants.index("baseline") if "baseline" in ds.variants else None
    for k in range(min(folds, n)):
        test = perm[k::folds]
        train = np.setdiff1d(perm, test)
        params, _ = search(kind, ds.X[train], ds.L[train], n_iter, seed + k, n_jobs, ds.variants, weighted)
        model = fit(kind, params, ds.X[train], y[train], len(ds.variants), seed,
                    weights=ds.weights[train] if weighted else None)
        s = model.scores(ds.X[test])
        ok = select.guard_allowed(ds.X[test], ds.variants, select.fit_ceilings(ds.X[train], ds.L[train], ds.variants))
        chosen[test] = choose(s, ds.L[test], ok)
        chosen_v[test] = choose_verify(s, ds.L[test], top_k, ok, always)
        chosen_ng[test] = choose(s, ds.L[test])
        fold_params.append(params)
    r, rv, rn = regrets(ds.L, chosen), regrets(ds.L, chosen_v), regrets(ds.L, chosen_ng)
    return CVResult(kind, float(r.mean()), float(rv.mean()), float(np.median(r)), float(np.median(rv)),
                    chosen, chosen_v, fold_params, chosen_ng, float(rn.mean()), float(np.median(rn)))


def single_best_cv(ds: Dataset, folds: int = FOLDS, seed: int = 0) -> tuple[float, np.ndarray]:
    """Reference: the variant with the lowest mean regret on the training split, applied to the test split."""
    n = len(ds.X)
    perm = np.random.default_rng(seed).permutation(n)
    chosen = np.zeros(n, dtype=np.int64)
    best_all = np.nanmin(ds.L, axis=1, keepdims=True)
    rel = np.where(np.isfinite(ds.L), ds.L / best_all - 1.0, np.inf)
    for k in range(min(folds, n)):
        test = perm[k::folds]
        train = np.setdiff1d(perm, test)
        fixed = int(np.argmin(np.mean(np.minimum(rel[train], 1e3), axis=0)))
        s = np.zeros((len(test), len(ds.variants)))
        s[:, fixed] = 1.0
        s[:, ds.variants.index("baseline") if "baseline" in ds.variants else 0] += 0.5  # fallback
        chosen[test] = choose(s, ds.L[test])
    return float(regrets(ds.L, chosen).mean()), chosen


# ---- the command --------------------------------------------------------------------------------
@dataclass(frozen=True)
class TrainingSettings:
    """How the selectors are trained: ``n_iter`` randomized-search draws (``rf_n_iter`` for the random forest, default
    ``n_iter``), ``folds`` outer CV folds, the verify step's ``top_k``, the ``classifiers`` ("xgboost", "rf"),
    ``n_jobs`` parallel draws, the ``seed`` and the latency ``metric`` column."""

    n_iter: int
    folds: int
    seed: int
    top_k: int
    classifiers: Sequence[str]
    n_jobs: int = 1
    rf_n_iter: Optional[int] = None
    metric: str = "time_s"


def train_all(datasets: dict[str, Dataset], out_dir: Path, report_dir: Optional[Path], training: TrainingSettings,
              tag: Optional[str] = None, log=print) -> dict:
    n_iter, folds, seed, top_k = training.n_iter, training.folds, training.seed, training.top_k
    classifiers, n_jobs, rf_n_iter, metric = training.classifiers, training.n_jobs, training.rf_n_iter, training.metric
    out_dir.mkdir(parents=True, exist_ok=True)
    backend = tag or next(iter(datasets.values())).backend
    summary: dict[str, Any] = {"backend": backend, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                               "feature_names": feature_names(), "n_iter": n_iter, "folds": folds,
                               "rf_n_iter": rf_n_iter if rf_n_iter is not None else n_iter, "metric": metric,
                               "top_k": top_k, "algorithms": {}}
    oof_rows = []
    for alg, ds in datasets.items():
        t0 = time.time()
        entry: dict[str, Any] = {"variants": ds.variants, "configs": len(ds.config_ids),
                                 "horizon": ds.meta.get("horizon"), "num_iter": ds.meta.get("num_iter")}
        results = {}
        for kind in classifiers:
            draws = rf_n_iter if (kind == "rf" and rf_n_iter is not None) else n_iter
            for weighted in (False, True):
                res = cross_validate(kind, ds, draws, folds, seed, top_k, n_jobs, weighted)
                name = kind + ("_weighted" if weighted else "")
                results[name] = res
                entry[f"regret_{name}_noguard"] = res.regret_noguard
                entry[f"median_regret_{name}_noguard"] = res.regret_noguard_median
                entry[f"regret_{name}"] = res.regret
                entry[f"regret_{name}_verify{top_k}"] = res.regret_verify
                entry[f"median_regret_{name}"] = res.regret_median
                entry[f"median_regret_{name}_verify{top_k}"] = res.regret_verify_median
        sb_regret, sb_chosen = single_best_cv(ds, folds, seed)
        entry["regret_single_best"] = sb_regret
        entry["median_regret_single_best"] = float(np.median(regrets(ds.L, sb_chosen)))
        if "baseline" in ds.variants:
            rb = regrets(ds.L, np.full(len(ds.L), ds.variants.index("baseline")))
            entry["regret_always_baseline"] = float(np.nanmean(rb))
            entry["median_regret_always_baseline"] = float(np.nanmedian(rb))
        # The shipped model: search on all configurations, refit on all; cost-weighted when that was better
        # out of fold.
        y = ds.labels
        weighted = entry.get("regret_xgboost_weighted", math.inf) < entry.get("regret_xgboost", math.inf)
        entry["cost_weighted"] = bool(weighted)
        params, _ = search("xgboost", ds.X, ds.L, n_iter, seed, n_jobs, ds.variants, weighted)
        model = fit("xgboost", params, ds.X, y, len(ds.variants), seed, weights=ds.weights if weighted else None)
        entry["size_guard"] = {"tolerance": select.GUARD_TOLERANCE, "margin": select.GUARD_MARGIN,
                               "ceilings": select.fit_ceilings(ds.X, ds.L, ds.variants)}
        path = out_dir / f"{backend}_{alg}.json"
        if isinstance(model, _Constant):
            entry["constant"] = ds.variants[model.cls]
            entry["slowdowns"] = select.slowdown_table(select.points_from_features(ds.X, feature_names()), ds.L,
                                                 ds.variants, entry["constant"], ds.config_ids)
            path.unlink(missing_ok=True)
        else:
            model.model.save_model(path)
            entry["classes"] = [ds.variants[c] for c in model.classes]
        entry["xgboost_params"] = params
        entry["train_seconds"] = round(time.time() - t0, 1)
        summary["algorithms"][alg] = entry
        for i, c in enumerate(ds.config_ids):
            row = {"config_id": c, "algorithm": alg, "best": ds.variants[int(np.nanargmin(ds.L[i]))],
                   "best_s": float(np.nanmin(ds.L[i])), "pymdp_s": float(ds.pymdp[i]),
                   "single_best": ds.variants[sb_chosen[i]]}
            for kind, res in results.items():
                row[f"{kind}"] = ds.variants[res.chosen[i]]
                row[f"{kind}_s"] = float(ds.L[i, res.chosen[i]])
                row[f"{kind}_noguard"] = ds.variants[res.chosen_noguard[i]]
                row[f"{kind}_noguard_s"] = float(ds.L[i, res.chosen_noguard[i]])
                row[f"{kind}_verify"] = ds.variants[res.chosen_verify[i]]
                row[f"{kind}_verify_s"] = float(ds.L[i, res.chosen_verify[i]])
            oof_rows.append(row)
        log(f"{alg}: {len(ds.config_ids)} configs, " + ", ".join(
            f"{k}={v:.2%}" for k, v in entry.items() if k.startswith("regret_")) + f" ({entry['train_seconds']} s)",
            flush=True)
    (out_dir / f"{backend}_meta.json").write_text(json.dumps(summary, indent=1, default=str))
    # the training data is a benchmark result, not a run-time file: beside the reports, else beside the models
    if report_dir is not None:
        report_dir.mkdir(parents=True, exist_ok=True)
    write_training_csv((report_dir or out_dir) / f"autotune_training_{backend}.csv", datasets)
    if report_dir is not None and oof_rows:
        with (report_dir / f"autotune_cv_{backend}.csv").open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(oof_rows[0].keys()))
            w.writeheader()
            w.writerows(oof_rows)
        (report_dir / f"autotune_regret_{backend}.md").write_text(regret_table(summary))
    return summary


def regret_table(summary: dict) -> str:
    k = summary.get("top_k", TOP_K)
    cols = [("regret_xgboost_noguard", "XGBoost (paper's rule)"), ("regret_xgboost", "XGBoost + guard"),
            ("regret_xgboost_weighted", "XGBoost cost-weighted + guard"),
            (f"regret_xgboost_verify{k}", f"XGBoost + guard + verify top-{k} & baseline"),
            (f"regret_xgboost_weighted_verify{k}", f"XGBoost cost-weighted + guard + verify top-{k} & baseline"),
            ("regret_rf_noguard", "RF (paper's rule)"), ("regret_rf", "RF + guard"),
            ("regret_rf_weighted", "RF cost-weighted + guard"),
            (f"regret_rf_verify{k}", f"RF + guard + verify top-{k} & baseline"),
            ("regret_single_best", "single best variant"), ("regret_always_baseline", "always baseline")]
    lines = [f"Autotuner regret ({summary['backend']}, {summary['folds']}-fold CV, randomized search: "
             f"{summary['n_iter']} draws XGBoost, {summary.get('rf_n_iter', summary['n_iter'])} draws RF; "
             f"latency metric {summary.get('metric', 'median_s')})",
             "", "Mean regret over held-out configurations (the paper's metric); median in parentheses. "
             "Guard: the size guard of `autotune/select.py`, fitted on each training split.", "",
             "| algorithm | configs | " + " | ".join(c[1] for c in cols) + " |",
             "|---|---|" + "---|" * len(cols)]
    for alg, e in summary["algorithms"].items():
        vals = []
        for c, _ in cols:
            mean, med = e.get(c), e.get(f"median_{c}")
            cell = f"{mean:.2%}" if isinstance(mean, float) else "-"
            vals.append(cell + (f" ({med:.1%})" if isinstance(med, float) else ""))
        lines.append(f"| {alg} | {e['configs']} | " + " | ".join(vals) + " |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    # tiny training splits make sklearn warn about fractional max_samples; the search just scores those draws
    warnings.filterwarnings("ignore", category=UserWarning, module="sklearn")
    p = argparse.ArgumentParser(prog="python -m lab autotune-train", description=__doc__.split("\n")[0])
    p.add_argument("csv", nargs="*", type=Path, help="benchmark CSVs from `python -m lab bench` (merged)")
    p.add_argument("--from-training-csv", type=Path, help="retrain from an autotune_training_*.csv instead")
    p.add_argument("--out-dir", type=Path, default=DEFAULT_MODEL_DIR, help="where the models are written")
    p.add_argument("--report-dir", type=Path, help="also write out-of-fold choices and the regret table here")
    p.add_argument("--cache", type=Path, help="generator cache (structure of each config_id)")
    p.add_argument("--metric", default="time_s",
                   help="latency column: time_s (the round-robin statistic, default), median_s, packed_median_s "
                        "or core_median_s (older sweeps); rows without it use median_s")
    p.add_argument("--tag", help="model name prefix (default: the backend in the CSV, e.g. cpu, gpu)")
    p.add_argument("--n-iter", type=int, default=N_ITER, help="randomized-search draws (paper: 60)")
    p.add_argument("--rf-n-iter", type=int, help="randomized-search draws for the random forest (default: --n-iter)")
    p.add_argument("--folds", type=int, default=FOLDS, help="outer CV folds (5 = 80/20)")
    p.add_argument("--top-k", type=int, default=TOP_K, help="verify step: time the top k")
    p.add_argument("--classifiers", nargs="+", default=["xgboost", "rf"], choices=["xgboost", "rf"])
    p.add_argument("--jobs", type=int, default=1, help="search draws evaluated in parallel processes")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--exclude", nargs="+", default=[], metavar="VARIANT",
                   help="train without these variants (e.g. the native ones, with --tag cpu_portable: the model "
                        "select_variant uses where numba is not installed)")
    args = p.parse_args(argv)
    if args.from_training_csv:
        datasets = read_training_csv(args.from_training_csv)
    else:
        if not args.csv:
            p.error("give benchmark CSVs or --from-training-csv")
        datasets = load_benchmark(args.csv, args.metric, args.cache)
    datasets = {alg: without_variants(ds, args.exclude) for alg, ds in datasets.items()}
    if not datasets:
        print("no usable rows (status ok) in the input")
        return 1
    training = TrainingSettings(args.n_iter, args.folds, args.seed, args.top_k, args.classifiers, args.jobs,
                                args.rf_n_iter, "(training CSV)" if args.from_training_csv else args.metric)
    summary = train_all(datasets, args.out_dir, args.report_dir, training, args.tag)
    print(regret_table(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
