"""What ``variant: auto`` costs: the plan and the start's build (what configure waits for), and the verify step
(build, first call and round-robin timing of the start and the candidates to verify: what the node's child process
does off the tick path).

    PYTHONPATH=. python benchmarks/verify_cost.py [--k 3] [--ids c0247]

Per algorithm: the plan (milliseconds), the start's build, the verify step in seconds (here, in this process; the
node's child adds its own start-up: Python, JAX's import), what runs after it and the timings, and the candidates
left out. Models: the default model (config/agent.yaml) and generator models (default c0247: F = 5, M = 25).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import jax

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bayes_infer_ros.autotune import EngineConfig, MemoryBudget  # noqa: E402
from bayes_infer_ros.autotune import decision as dec  # noqa: E402
from bayes_infer_ros.autotune import deployment as dep  # noqa: E402
from bayes_infer_ros.autotune.devices import Devices  # noqa: E402
from bayes_infer_ros.model.io import load_model  # noqa: E402
from lab import generator  # noqa: E402

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
    found = Devices({"cpu": jax.devices("cpu")[0]})
    print(f"load {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs, k={args.k}")
    for name, model in models:
        for algorithm in ("fpi", "vmp", "mmp"):
            config = EngineConfig(algorithm, "auto", 16, 1.0, args.horizon, args.k, "cpu")
            t0 = time.perf_counter()
            plan = dec.plan_decision(model, config, MemoryBudget.from_mib(2048, "memory_budget_mb"), found=found)
            t_plan = time.perf_counter() - t0
            plan, engine = dep.start_engine(plan, model)
            t_start = time.perf_counter() - t0 - t_plan
            left_out = "; ".join(f"left out {c}" for c, _ in plan.skipped)
            if not plan.verify:
                print(f"{name:24s} {algorithm}: plan {t_plan * 1e3:.1f} ms, start {t_start:.2f} s ({plan.start}), "
                      f"nothing to verify; {left_out}", flush=True)
                continue
            t0 = time.perf_counter()
            timings, errors = dep.verify_candidates(model, config, plan.timed, found,
                                                    engines={str(plan.start): engine})
            outcome = dec.conclude(plan, timings, errors)
            t_verify = time.perf_counter() - t0
            timed = ", ".join(f"{n} {t.time_s * 1e6:.0f} us" for n, t in outcome.timings.items())
            print(f"{name:24s} {algorithm}: plan {t_plan * 1e3:.1f} ms, start {t_start:.2f} s ({plan.start}), "
                  f"verify {t_verify:.1f} s off the tick path -> {outcome.run} ({timed}){'; ' + left_out if left_out else ''}",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
