"""Many agents beside a busy machine: the fleet's FPI step (b agents of the default model in one call) on the calling
thread, on every CPU, and as the engine runs it (whichever of the two is measured faster now: ``host.FasterWay``),
with the machine otherwise idle and beside busy loops in other processes.

    PYTHONPATH=. python benchmarks/fleet_contention.py --b 100 1000 --busy 0 2 --out benchmarks/fleet_contention_cpu.csv

Per (b, number of busy loops): the three candidates round-robin in one process (``autotune.timing.time_round_robin``,
many short rounds; the median per-call time over rounds, the 10th and 90th percentiles beside it), each a stepper
of its own bound to the same agents' inputs; the busy loops are ``python -c "while True: pass"`` processes started
before and killed after. ``serial``: every agent on the calling thread (``host.MIN_AGENTS_PER_THREAD`` above b);
``parallel``: blocks on every usable CPU always (its chooser fixed to that way); ``engine``: the engine's own
stepper. Agent-ticks per second = b / seconds per call; each row records the machine, versions and load.
"""
from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bayes_infer_ros.autotune.timing import environment, loadavg, time_round_robin  # noqa: E402
from bayes_infer_ros.inference import engine_for_model  # noqa: E402
from bayes_infer_ros.inference.native import host  # noqa: E402
from bayes_infer_ros.model.io import load_model  # noqa: E402

BUSY = [sys.executable, "-c", "while True: pass"]


class _Always:
    """A chooser fixed to one way (the benchmark's ``parallel`` candidate)."""

    def __init__(self, way: int):
        self.way = way

    def choose(self) -> int:
        return self.way

    def record(self, way: int, seconds: float) -> None:
        return None


def steppers(model, b: int, num_iter: int) -> dict:
    """name -> a zero-argument step of b agents (one engine, three steppers bound to the same inputs)."""
    rng = np.random.default_rng(0)
    engine = engine_for_model(model, "fpi", variant="fused_numba", num_iter=num_iter)
    obs = np.ascontiguousarray(np.concatenate(
        [np.eye(a.shape[0], dtype=np.float32)[rng.integers(0, a.shape[0], b)] for a in model.A], 1))
    prior = np.ascontiguousarray(np.concatenate([rng.dirichlet(np.ones(len(d)), b) for d in model.D], 1), np.float32)
    action = np.ascontiguousarray(np.stack([rng.integers(0, B.shape[-1], b) for B in model.B], 1), np.int32)
    real_chooser, real_min = host.FasterWay, host.MIN_AGENTS_PER_THREAD
    out = {"engine": engine.stepper(obs, prior, action)}
    try:
        from bayes_infer_ros.inference.native import engine as engine_module
        engine_module.FasterWay = lambda: _Always(1)
        out["parallel"] = engine.stepper(obs, prior, action)
    finally:
        engine_module.FasterWay = real_chooser
    serial = engine.stepper(obs, prior, action)

    def one_thread():
        host.MIN_AGENTS_PER_THREAD = b + 1
        try:
            return serial()
        finally:
            host.MIN_AGENTS_PER_THREAD = real_min

    out["serial"] = one_thread
    ref = out["serial"]()
    for name, fn in out.items():
        assert np.array_equal(fn(), ref), name  # the same bits whatever the way
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--b", type=int, nargs="+", default=[100, 1000])
    p.add_argument("--busy", type=int, nargs="+", default=[0, 2], help="busy loops beside the benchmark")
    p.add_argument("--num-iter", type=int, default=16)
    p.add_argument("--seconds", type=float, default=20.0, help="timing per (b, busy)")
    args = p.parse_args()
    model = load_model(ROOT / "config" / "agent.yaml")
    env = environment("float32")
    rows = []
    for busy in args.busy:
        loops = [subprocess.Popen(BUSY) for _ in range(busy)]
        try:
            time.sleep(1.0 if busy else 0.0)
            for b in args.b:
                load = loadavg()
                t = time_round_robin(steppers(model, b, args.num_iter), rounds=400, round_target_s=0.01,
                                     max_time_s=args.seconds)
                serial = t["serial"].median_s
                for name, timing in t.items():
                    rows.append({"b": b, "busy_loops": busy, "candidate": name,
                                 "median_us": round(timing.median_s * 1e6, 1), "p10_us": round(timing.time_s * 1e6, 1),
                                 "p90_us": round(timing.p90_s * 1e6, 1),
                                 "agent_ticks_per_s": round(b / timing.median_s), "vs_serial": round(serial / timing.median_s, 3),
                                 "rounds": timing.rounds, "load": load, **{f"env_{k}": v for k, v in env.items()}})
                    r = rows[-1]
                    print(f"b={b:5d} busy={busy} {name:9s} {r['median_us']:9.1f} us  {r['agent_ticks_per_s']:9.4g} "
                          f"agent-ticks/s  {r['vs_serial']:.2f}x one thread", flush=True)
        finally:
            for loop in loops:
                loop.kill()
                loop.wait()
    with open(args.out, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
