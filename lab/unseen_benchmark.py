"""Is ``variant: auto`` with verify ever slower than ``baseline`` on models the autotuner never saw?

    python -m lab bench-unseen [--models 12] [--seed 7] [--k 3] \
        --csv benchmarks/unseen_vs_baseline_cpu.csv > benchmarks/unseen_vs_baseline_cpu.md

Models: the paper's generator with another seed than the training sweep's (``generator.DEFAULT_SEED``), one
model per stratum with F, M <= 25 (every ``len // models``-th in the generator's order). Per model and
algorithm, what the node does at configure time: ``rank_variants`` then ``verify_engines`` on the top k (and
baseline, always). Then, as an independent check, the pick and a freshly built baseline are timed again,
round-robin in this process (``timing.time_round_robin``, 60 rounds, at most 2 s). The figure is
pick / baseline on that second timing; above 1 + the noise floor (``benchmarks/noise_floor_engine_cpu.txt``)
would be a pick measurably slower than baseline.
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

import numpy as np

from bayes_infer_ros import inference
from bayes_infer_ros.autotune import EngineConfig, MemoryBudget, decide, rank_variants
from bayes_infer_ros.autotune.select import engine_call
from bayes_infer_ros.autotune.timing import time_round_robin
from lab import generator

ALGORITHMS = ("fpi", "vmp", "mmp")
NOISE_FLOOR = 0.033  # the larger of the two noise-floor figures in benchmarks/noise_floor_engine_cpu.txt


def unseen_specs(seed: int, count: int, max_fm: int = 25) -> list:
    specs = [s for s in generator.generate_specs(seed=seed) if s.F <= max_fm and s.M <= max_fm and s.sample == 0]
    step = max(len(specs) // count, 1)
    return specs[::step][:count]


def build(algorithm: str, model, variant: str, num_iter: int):
    return inference.build_inference(algorithm, model.A, model.A_dependencies, model.B, model.B_dependencies,
                                     variant=variant, num_iter=num_iter)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab bench-unseen", description=__doc__.split("\n")[0])
    p.add_argument("--models", type=int, default=12)
    p.add_argument("--seed", type=int, default=7, help="generator seed (the training sweep used 0)")
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--horizon", type=int, default=5)
    p.add_argument("--num-iter", type=int, default=16)
    p.add_argument("--csv", type=Path, default=None)
    args = p.parse_args(argv)
    rows = []
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for spec in unseen_specs(args.seed, args.models):
        model = generator.build_model(spec)
        for algorithm in ALGORITHMS:
            t0 = time.perf_counter()
            ranked = [v for v, _ in rank_variants(algorithm, model, horizon=args.horizon, num_iter=args.num_iter)]
            config = EngineConfig(algorithm, "auto", args.num_iter, 1.0, args.horizon, args.k, "cpu")
            decision = decide(model, config, MemoryBudget.from_mib(2048, "memory_budget_mb"))  # the node's decision
            pick, engine = decision.variant, decision.engine
            verify_t = {name.rsplit("@", 1)[0]: t for name, t in decision.timings.items()}
            configure_s = time.perf_counter() - t0
            if pick == "baseline":
                ratio, t_pick, t_base = 1.0, verify_t["baseline"], verify_t["baseline"]
            else:
                base = build(algorithm, model, "baseline", args.num_iter)
                again = time_round_robin({"pick": engine_call(engine, algorithm, args.horizon),
                                          "baseline": engine_call(base, algorithm, args.horizon)},
                                         rounds=60, max_time_s=2.0)
                t_pick, t_base = again["pick"].time_s, again["baseline"].time_s
                ratio = t_pick / t_base
            row = {"config_id": spec.config_id, "stratum": spec.stratum, "F": spec.F, "M": spec.M,
                   "algorithm": algorithm, "predicted": ranked[0], "top_k": " ".join(ranked[: args.k]), "pick": pick,
                   "pick_us": round(t_pick * 1e6, 2), "baseline_us": round(t_base * 1e6, 2),
                   "pick_over_baseline": round(ratio, 4), "configure_s": round(configure_s, 2),
                   "load": round(os.getloadavg()[0], 2)}
            rows.append(row)
            print(f"<!-- {row} -->", file=sys.stderr, flush=True)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    cmd = "python -m lab bench-unseen " + " ".join(argv if argv is not None else sys.argv[1:])
    print(f"# `{cmd}` ({started}, {os.cpu_count()} CPUs)\n")
    print(f"Generator seed {args.seed} (training: {generator.DEFAULT_SEED}), {len(rows) // len(ALGORITHMS)} models, "
          f"verify top {args.k} + baseline, horizon {args.horizon}. Ratio = pick / baseline, timed again after the "
          f"pick; noise floor {NOISE_FLOOR:.1%}.\n")
    print("| algorithm | models | pick = predicted | pick = baseline | pick/baseline median | worst | "
          f"over 1 + floor | configure s median (max) |")
    print("|---|---|---|---|---|---|---|---|")
    for algorithm in ALGORITHMS:
        rs = [r for r in rows if r["algorithm"] == algorithm]
        ratios = np.array([r["pick_over_baseline"] for r in rs])
        conf = np.array([r["configure_s"] for r in rs])
        print(f"| {algorithm} | {len(rs)} | {sum(r['pick'] == r['predicted'] for r in rs)} | "
              f"{sum(r['pick'] == 'baseline' for r in rs)} | {np.median(ratios):.3f} | {ratios.max():.3f} | "
              f"{int(np.sum(ratios > 1 + NOISE_FLOOR))} | {np.median(conf):.1f} ({conf.max():.1f}) |")
    print("\n| config | stratum | algorithm | predicted | pick | pick us | baseline us | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['config_id']} | {r['stratum']} | {r['algorithm']} | {r['predicted']} | {r['pick']} | "
              f"{r['pick_us']} | {r['baseline_us']} | {r['pick_over_baseline']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
