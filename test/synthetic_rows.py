"""Synthetic benchmark rows (no timing): a test fixture that exercises reports and training in seconds.

Latencies are a seeded function of the structure (each variant wins on part of the space), so a classifier
has something real to learn; the rows have the harness's columns and statuses, including memory skips.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from bayes_infer_ros.autotune.select import size_estimates
from lab.generator import ConfigSpec
from lab.harness import PYMDP

SYNTHETIC_VARIANTS = ("baseline", "hybrid", "clustered_hybrid", "hybrid_block", "clustered_hybrid_block")


def synthetic_rows(specs: Sequence[ConfigSpec], algorithms=("fpi", "vmp", "mmp"),
                   variants: Sequence[str] = SYNTHETIC_VARIANTS, seed: int = 0, noise: float = 0.03) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for spec in specs:
        est = size_estimates(spec)
        dense = est["baseline"]
        for a_idx, alg in enumerate(algorithms):
            base = 1e-4 * (spec.M + spec.F) * (1 + 0.3 * a_idx) + 1e-8 * dense * (1 + 4 * (alg != "fpi"))
            env = {"machine": "synthetic", "jax": "0", "jaxlib": "0", "backend": "cpu", "device": "cpu",
                   "dtype": "float32", "loadavg": 0.0, "horizon": 1 if alg == "fpi" else 5, "num_iter": 16}
            common = {"config_id": spec.config_id, "stratum": spec.stratum, "F": spec.F, "M": spec.M,
                      "algorithm": alg, **env}
            rows.append({**common, "variant": PYMDP, "status": "ok", "median_s": base * 1.2,
                         "param_count": dense})
            for v in variants:
                size = est.get(v, dense)
                # merged variants pay for padding but save per-modality overhead
                t = base * (1.0 if v == "baseline" else 0.55 + 0.1 * len(v) / 10) + 2e-9 * size
                t *= math.exp(noise * rng.standard_normal())
                if size > 5e7:
                    rows.append({**common, "variant": v, "status": "skipped_memory", "param_count": size})
                    continue
                rows.append({**common, "variant": v, "status": "ok", "median_s": t, "packed_median_s": 0.8 * t,
                             "param_count": size, "compile_s": 1.0})
    return rows
