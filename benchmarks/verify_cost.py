"""What ``variant: auto`` costs at configure time: rank, then build, compile and time the top k and baseline.

    PYTHONPATH=. python benchmarks/verify_cost.py [--k 3] [--ids c0247]

Per algorithm: the ranking (milliseconds), the verify step in seconds (build + first call + round-robin
timing of top k + baseline, what the node's builder does off the tick path), the pick and the timings.
Models: the default model (config/agent.yaml) and generator models with M = 25 (default c0247: F = 5, M = 25).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bayes_infer_ros.autotune import EngineConfig, MemoryBudget, decide, rank_variants  # noqa: E402
from lab import generator  # noqa: E402
from bayes_infer_ros.model.io import load_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--ids", nargs="+", default=["c0247"])
    p.add_argument("--horizon", type=int, default=5)
    args = p.parse_args(argv)
    specs = {s.config_id: s for s in generator.generate_specs()}
    models = [("default model", load_model(ROOT / "config" / "agent.yaml"))]
    models += [(f"{i} (F={specs[i].F}, M={specs[i].M})", generator.build_model(specs[i])) for i in args.ids]
    print(f"load {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs, k={args.k}")
    for name, model in models:
        for algorithm in ("fpi", "vmp", "mmp"):
            t0 = time.perf_counter()
            ranked = [v for v, _ in rank_variants(algorithm, model, horizon=args.horizon)]
            t_rank = time.perf_counter() - t0
            t0 = time.perf_counter()
            config = EngineConfig(algorithm, "auto", 16, 1.0, args.horizon, args.k, "cpu")
            decision = decide(model, config, MemoryBudget.from_mib(2048, "memory_budget_mb"))  # the node's decision
            best, timings = decision.variant, decision.timings
            t_verify = time.perf_counter() - t0
            timed = ", ".join(f"{v} {t * 1e6:.0f} us" for v, t in timings.items())
            print(f"{name:24s} {algorithm}: rank {t_rank * 1e3:.1f} ms, verify {t_verify:.1f} s -> {best} ({timed})",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
