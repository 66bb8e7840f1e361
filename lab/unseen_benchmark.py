"""Does ``variant: auto``'s verify step end on the fastest candidate, and is it ever slower than ``baseline``, on models
the autotuner never saw?

    python -m lab bench-unseen [--models 16] [--seed 7] [--k 3] \
        --csv benchmarks/unseen_vs_baseline_cpu.csv > benchmarks/unseen_vs_baseline_cpu.md
    python -m lab bench-unseen --without-numba \
        --csv benchmarks/unseen_vs_baseline_portable_cpu.csv > benchmarks/unseen_vs_baseline_portable_cpu.md

Models: the paper's generator with another seed than the training sweep's (``generator.DEFAULT_SEED``), one
model per stratum with F, M <= 25 (every ``len // models``-th in the generator's order). Per model and
algorithm, the node's pipeline (``autotune.decision``): the plan and the start's build (what configure waits for),
then the verify step (``verify_candidates``, which the node runs in a child process) and its conclusion (the start
is replaced only beyond the noise). Then, as an independent check, what it ended on is timed again against every
candidate, the ones the plan left out (predicted to lose by a wide margin) and ``baseline`` included, round-robin in
this process (``timing.time_round_robin``, 60 rounds, at most 2 s). Above 1 + the noise floor
(``benchmarks/noise_floor_engine_cpu.txt``), run / fastest would be a verify step that missed the fastest candidate,
run / baseline a choice measurably slower than baseline. ``--without-numba`` decides as an install without numba does
(a ranking with a choice: the candidates verified are the ranking model's top k and baseline).
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

import jax
import numpy as np

from bayes_infer_ros.autotune import EngineConfig, MemoryBudget
from bayes_infer_ros.autotune import decision as dec
from bayes_infer_ros.autotune import deployment as dep
from bayes_infer_ros.autotune.devices import Devices
from bayes_infer_ros.autotune.select import engine_call
from bayes_infer_ros.autotune.timing import time_round_robin
from lab import generator

ALGORITHMS = ("fpi", "vmp", "mmp")
NOISE_FLOOR = 0.033  # the larger of the two noise-floor figures in benchmarks/noise_floor_engine_cpu.txt


def unseen_specs(seed: int, count: int, max_fm: int = 25) -> list:
    specs = [s for s in generator.generate_specs(seed=seed) if s.F <= max_fm and s.M <= max_fm and s.sample == 0]
    step = max(len(specs) // count, 1)
    return specs[::step][:count]


def one(model, algorithm: str, args, found: Devices) -> dict:
    """The pipeline on ``model``, then the independent check; one CSV row (less the model's columns)."""
    config = EngineConfig(algorithm, "auto", args.num_iter, 1.0, args.horizon, args.k, "cpu")
    t0 = time.perf_counter()
    plan = dec.plan_decision(model, config, MemoryBudget.from_mib(2048, "memory_budget_mb"), found=found)
    plan, engine = dep.start_engine(plan, model)
    configure_s = time.perf_counter() - t0
    engines = {str(plan.start): engine}
    t0 = time.perf_counter()
    timings, errors = dep.verify_candidates(model, config, plan.timed, found, engines=engines)
    outcome = dec.conclude(plan, timings, errors)
    verify_s = time.perf_counter() - t0 if plan.verify else 0.0
    every = list(dict.fromkeys(plan.timed + tuple(c for c, _ in plan.skipped) + (dec.Candidate("cpu", "baseline"),)))
    for c in every:
        if str(c) not in engines:
            try:
                engines[str(c)] = dep.engine_for(model, config, c.variant, found.by_platform[c.platform])
            except (MemoryError, ValueError):
                continue
    again = time_round_robin({name: engine_call(e, algorithm, args.horizon) for name, e in engines.items()},
                             rounds=60, max_time_s=2.0)
    run, fastest = str(outcome.run), min(again, key=lambda n: again[n].time_s)
    base = again["baseline@cpu"].time_s
    return {"algorithm": algorithm, "start": plan.start.variant, "verified": " ".join(c.variant for c in plan.verify),
            "left_out": " ".join(c.variant for c, _ in plan.skipped), "run": outcome.run.variant,
            "swap": int(outcome.swap), "run_us": round(again[run].time_s * 1e6, 2), "baseline_us": round(base * 1e6, 2),
            "fastest": fastest.rsplit("@", 1)[0], "fastest_us": round(again[fastest].time_s * 1e6, 2),
            "run_over_baseline": round(again[run].time_s / base, 4),
            "run_over_fastest": round(again[run].time_s / again[fastest].time_s, 4),
            "configure_s": round(configure_s, 2), "verify_s": round(verify_s, 2), "load": round(os.getloadavg()[0], 2)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab bench-unseen", description=__doc__.split("\n")[0])
    p.add_argument("--models", type=int, default=16)
    p.add_argument("--seed", type=int, default=7, help="generator seed (the training sweep used 0)")
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--horizon", type=int, default=5)
    p.add_argument("--num-iter", type=int, default=16)
    p.add_argument("--algorithms", nargs="+", default=list(ALGORITHMS))
    p.add_argument("--without-numba", action="store_true",
                   help="decide as an install without numba does (the ranking model of the JAX variants)")
    p.add_argument("--csv", type=Path, default=None)
    args = p.parse_args(argv)
    if args.without_numba:
        from bayes_infer_ros.autotune import select
        from bayes_infer_ros.inference.native import NativeEngine

        select.numba_available = lambda: False
        NativeEngine.available = staticmethod(lambda: False)
    found = Devices({"cpu": jax.devices("cpu")[0]})
    rows = []
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for spec in unseen_specs(args.seed, args.models):
        model = generator.build_model(spec)
        for algorithm in args.algorithms:
            row = {"config_id": spec.config_id, "stratum": spec.stratum, "F": spec.F, "M": spec.M,
                   **one(model, algorithm, args, found)}
            rows.append(row)
            print(f"<!-- {row} -->", file=sys.stderr, flush=True)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    cmd = "python -m lab bench-unseen " + " ".join(argv if argv is not None else sys.argv[1:])
    print(f"# `{cmd}` ({started}, {os.cpu_count()} CPUs, load {min(r['load'] for r in rows):.1f}-"
          f"{max(r['load'] for r in rows):.1f})\n")
    print(f"Generator seed {args.seed} (training: {generator.DEFAULT_SEED}), {len(rows) // len(args.algorithms)} models, "
          f"verify top {args.k}, horizon {args.horizon}. Timed again after the verify step against every candidate; "
          f"noise floor {NOISE_FLOOR:.1%}.\n")
    print("| algorithm | models | verify steps | swaps | run/baseline median | worst | run/fastest worst | "
          "over 1 + floor | configure s median (max) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for algorithm in args.algorithms:
        rs = [r for r in rows if r["algorithm"] == algorithm]
        ratios = np.array([r["run_over_baseline"] for r in rs])
        fastest = np.array([r["run_over_fastest"] for r in rs])
        conf = np.array([r["configure_s"] for r in rs])
        print(f"| {algorithm} | {len(rs)} | {sum(bool(r['verified']) for r in rs)} | {sum(r['swap'] for r in rs)} | "
              f"{np.median(ratios):.3f} | {ratios.max():.3f} | {fastest.max():.3f} | "
              f"{int(np.sum((ratios > 1 + NOISE_FLOOR) | (fastest > 1 + NOISE_FLOOR)))} | "
              f"{np.median(conf):.2f} ({conf.max():.2f}) |")
    print("\n| config | stratum | algorithm | start | verified | left out | run | fastest | run us | baseline us |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['config_id']} | {r['stratum']} | {r['algorithm']} | {r['start']} | {r['verified'] or '-'} | "
              f"{r['left_out'] or '-'} | {r['run']} | {r['fastest']} | {r['run_us']} | {r['baseline_us']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
