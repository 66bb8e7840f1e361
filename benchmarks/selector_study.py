"""Which form of selector? Classifier vs latency regressors, with and without the size guard.

The shipped autotuner is the paper's classifier (XGBoost, one class per variant) plus the size guard
(``bayes_infer_ros/autotune/select.py``). This study asks whether a *cost-aware* selector, one that regresses
each variant's log latency ratio to the fastest and picks the smallest prediction, does better on the same
data. Every selector sees the same 5 outer folds (seeded like ``autotune-train``) and fixed, moderate
hyperparameters (no search: this compares the forms, not their tuning). Regret is the paper's metric.

    PYTHONPATH=. python benchmarks/selector_study.py benchmarks/autotune_training_cpu.csv \
        > benchmarks/selector_study_cpu.md
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import Callable

import numpy as np

from bayes_infer_ros.autotune import select
from lab.train_autotuner import choose, choose_verify, fit, read_training_csv, regrets

CLIP = np.log(50.0)  # targets: log(latency / fastest), capped; a variant that did not run gets the cap
XGB = dict(n_estimators=300, max_depth=4, learning_rate=0.05, subsample=0.8, colsample_bytree=0.8)


def log_ratios(L: np.ndarray) -> np.ndarray:
    R = np.log(L / np.nanmin(L, axis=1, keepdims=True))
    return np.where(np.isfinite(R), np.minimum(R, CLIP), CLIP)


def xgb_classifier(X, L, Xt, seed):
    """The paper's form: one class per variant (``bench.train_autotuner.fit``), score = class probability."""
    return fit("xgboost", XGB, X, np.nanargmin(L, axis=1), L.shape[1], seed).scores(Xt)


def xgb_regressors(X, L, Xt, seed):
    """One XGBoost regressor per variant on log(latency / fastest); score = minus the prediction."""
    import xgboost as xgb

    R = log_ratios(L)
    return -np.stack([xgb.XGBRegressor(random_state=seed, n_jobs=1, **XGB).fit(X, R[:, j]).predict(Xt)
                      for j in range(R.shape[1])], axis=1)


def rf_regressor(X, L, Xt, seed):
    """One multi-output random forest on the vector of log ratios."""
    from sklearn.ensemble import RandomForestRegressor

    m = RandomForestRegressor(n_estimators=500, min_samples_leaf=2, max_features=0.5, n_jobs=1, random_state=seed)
    return -m.fit(X, log_ratios(L)).predict(Xt)


SELECTORS: dict[str, Callable] = {"XGBoost classifier (paper)": xgb_classifier,
                                  "XGBoost regressor per variant": xgb_regressors,
                                  "RF multi-output regressor": rf_regressor}


def main(argv=None) -> int:
    warnings.filterwarnings("ignore")
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("training_csv", type=Path)
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--top-k", type=int, default=3)
    args = p.parse_args(argv)
    datasets = read_training_csv(args.training_csv)
    print(f"Selector study on `{args.training_csv}` ({args.folds}-fold CV, seed {args.seed}); mean regret, "
          f"median in parentheses, worst after the slash.\n")
    print(f"| algorithm | configs | selector | no guard | guard | guard + verify top-{args.top_k} |")
    print("|---|---|---|---|---|---|")
    for alg, ds in datasets.items():
        n = len(ds.X)
        perm = np.random.default_rng(args.seed).permutation(n)
        for name, fn in SELECTORS.items():
            t0 = time.time()
            S = np.zeros_like(ds.L)
            ok = np.ones_like(ds.L, dtype=bool)
            for k in range(min(args.folds, n)):
                test = perm[k::args.folds]
                train = np.setdiff1d(perm, test)
                S[test] = fn(ds.X[train], ds.L[train], ds.X[test], args.seed)
                ok[test] = select.guard_allowed(ds.X[test], ds.variants,
                                         select.fit_ceilings(ds.X[train], ds.L[train], ds.variants))
            cells = []
            for chosen in (choose(S, ds.L), choose(S, ds.L, ok), choose_verify(S, ds.L, args.top_k, ok)):
                r = regrets(ds.L, chosen)
                cells.append(f"{r.mean():.1%} ({np.median(r):.1%}) / {r.max():.0%}")
            print(f"| {alg} | {n} | {name} | " + " | ".join(cells) + " |", flush=True)
            print(f"{alg} {name}: {time.time() - t0:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
