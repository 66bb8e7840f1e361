"""``python -m lab bench-holdout``: fused_numba against pymdp 1.0.4 on generated models no autotuner or tuning run
has seen (the generator with another seed than the training sweep's), one per stratum of the paper's grid with F,
M <= 25, every algorithm.

    python -m lab bench-holdout --csv benchmarks/holdout_cpu.csv > benchmarks/holdout_cpu.md

Per (model, algorithm), round-robin in this process (``autotune.timing.time_round_robin``): pymdp's jitted call on
JAX arrays (``lab.harness.pymdp_callable``, its natural inputs), fused_numba's packed call on numpy arrays (what the
node's engine calls make) and its list call (pymdp's conventions, numpy arrays). The outputs are checked against
pymdp's at the tolerance table's float32 bound before timing. Ratios are pymdp's time over ours (> 1: faster than
pymdp), each the median over rounds of the per-round ratio (a round a busy machine slowed slows both).
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import Optional

import numpy as np

ALGORITHMS = ("fpi", "vmp", "mmp")
SEED = 11  # not the training sweep's (generator.DEFAULT_SEED) nor bench-unseen's
HORIZON, NUM_ITER = 5, 16
FIELDS = ("seed", "config", "stratum", "F", "M", "a_elements", "algorithm", "pymdp_us", "packed_us", "list_us",
          "packed_speedup", "list_speedup", "max_abs_diff", "rounds", "load", "machine", "cpu", "jax", "numba")


def holdout_specs(seed: int = SEED, max_fm: int = 25) -> list:
    """One configuration per stratum (F, M, regime) with F, M <= ``max_fm``: the first sample of its first
    combination in the generator's order, at ``seed``."""
    from lab import generator

    seen, out = set(), []
    for spec in generator.generate_specs(seed=seed):
        if spec.F <= max_fm and spec.M <= max_fm and spec.sample == 0 and spec.stratum not in seen:
            seen.add(spec.stratum)
            out.append(spec)
    return out


def paired(num, den) -> float:
    pairs = np.asarray(list(zip(num.samples, den.samples)), dtype=float)
    return float(np.median(pairs[:, 0] / pairs[:, 1]))


def one(spec, model, algorithm: str, rounds: int, max_time_s: float) -> dict:
    import jax.numpy as jnp

    from bayes_infer_ros.autotune.timing import time_round_robin
    from bayes_infer_ros.inference import engine_for_model
    from lab.harness import make_inputs, pymdp_callable

    inp = make_inputs(spec, model, algorithm, HORIZON, np.float32)
    engine = engine_for_model(model, algorithm, variant="fused_numba", num_iter=NUM_ITER)
    layout = engine.layout
    ob = np.ascontiguousarray(layout.pack_obs(inp["obs"]), np.float32)
    pr = np.ascontiguousarray(layout.pack_states(inp["prior"]), np.float32)
    acts = inp["actions"]
    fn = pymdp_callable(algorithm, spec.A_dependencies, model.B_dependencies, NUM_ITER, 1.0)
    A = [jnp.asarray(a) for a in model.A]
    obs = [jnp.asarray(o) for o in inp["obs"]]
    prior = [jnp.asarray(p) for p in inp["prior"]]
    obs_np, prior_np = [np.asarray(o) for o in inp["obs"]], [np.asarray(p) for p in inp["prior"]]
    if algorithm == "fpi":
        calls = {"pymdp": lambda: fn(A, obs, prior), "packed": lambda: engine.run_packed(ob, pr),
                 "list": lambda: engine(obs_np, prior_np)}
    else:
        B, a = [jnp.asarray(b) for b in model.B], jnp.asarray(acts)
        calls = {"pymdp": lambda: fn(A, B, obs, prior, a), "packed": lambda: engine.run_packed(ob, pr, acts),
                 "list": lambda: engine(obs_np, prior_np, acts)}
    want = np.concatenate([np.asarray(x) for x in calls["pymdp"]()], axis=-1)
    diff = float(np.max(np.abs(np.asarray(calls["packed"]()) - want)))
    t = time_round_robin(calls, rounds=rounds, max_time_s=max_time_s)
    return {"pymdp_us": round(t["pymdp"].median_s * 1e6, 2), "packed_us": round(t["packed"].median_s * 1e6, 2),
            "list_us": round(t["list"].median_s * 1e6, 2),
            "packed_speedup": round(1.0 / paired(t["packed"], t["pymdp"]), 3),
            "list_speedup": round(1.0 / paired(t["list"], t["pymdp"]), 3), "max_abs_diff": diff,
            "rounds": t["pymdp"].rounds}


def table(rows: list[dict]) -> str:
    """The summary: per algorithm, pymdp / fused_numba (packed and list calls), median (worst)."""
    lines = ["| algorithm | models | packed call: median (worst) | list call: median (worst) |", "|---|---:|---|---|"]
    for algorithm in ALGORITHMS:
        rs = [r for r in rows if r["algorithm"] == algorithm]
        if not rs:
            continue
        p = [float(r["packed_speedup"]) for r in rs]
        li = [float(r["list_speedup"]) for r in rs]
        lines.append(f"| {algorithm} | {len(rs)} | {np.median(p):.2f}x ({min(p):.2f}x) | "
                     f"{np.median(li):.2f}x ({min(li):.2f}x) |")
    return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m lab bench-holdout", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--csv", type=Path, required=False, help="write every row here")
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--rounds", type=int, default=60)
    p.add_argument("--max-time", type=float, default=2.0, help="seconds of timing per (model, algorithm)")
    return p


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    import numba

    from bayes_infer_ros.autotune.timing import environment, loadavg
    from lab import generator

    env = environment("float32")
    rows = []
    for spec in holdout_specs(args.seed):
        model = generator.build_model(spec)
        for algorithm in ALGORITHMS:
            row = {"seed": args.seed, "config": spec.config_id, "stratum": spec.stratum, "F": spec.F, "M": spec.M,
                   "a_elements": sum(spec.a_elements()), "algorithm": algorithm, "load": loadavg(),
                   "machine": env["machine"], "cpu": env["cpu"], "jax": env["jax"], "numba": numba.__version__}
            row.update(one(spec, model, algorithm, args.rounds, args.max_time))
            rows.append(row)
            print(f"{spec.config_id} {spec.stratum:<18} {algorithm}: pymdp {row['pymdp_us']:9.1f} us, fused_numba "
                  f"packed {row['packed_us']:8.1f} us ({row['packed_speedup']:.2f}x), list {row['list_us']:8.1f} us "
                  f"({row['list_speedup']:.2f}x), max |diff| {row['max_abs_diff']:.1e}", file=sys.stderr, flush=True)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=FIELDS)
            w.writeheader()
            w.writerows(rows)
    print(f"# `python -m lab bench-holdout` (seed {args.seed}): {len(rows) // len(ALGORITHMS)} unseen models, one per "
          f"stratum with F, M <= 25; pymdp 1.0.4 / fused_numba, per-round ratios' median\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
