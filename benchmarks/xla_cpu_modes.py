"""Default model, one process: every (algorithm, variant)'s packed call with its XLA:CPU execution mode and a
round-robin latency, next to pymdp and the JAX dispatch floor (a trivial jitted call).

    PYTHONPATH=. python benchmarks/xla_cpu_modes.py [--variants ...] [--rounds 30]

XLA_FLAGS set by the caller apply to every program (XLA reads them once per process), so compare flag
settings by running this twice (benchmarks/cpu_threads.sh does, for the thread and affinity settings).
``--pin-after-start CPUS`` restricts the process to those CPUs after jax has started (what the node's
``cpu_affinity`` parameter does), as opposed to ``taskset`` before start.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lab.xla_mode import LOG_ENV, capture_modes, program_label  # noqa: E402

os.environ.update(LOG_ENV)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_ticks import MODEL, tick_callable  # noqa: E402

from bayes_infer_ros.autotune.timing import time_round_robin  # noqa: E402
from bayes_infer_ros.model.io import load_model  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--algorithms", nargs="+", default=["fpi", "vmp", "mmp"])
    p.add_argument("--variants", nargs="+", default=["baseline", "fused_dense", "fused_pairwise", "fused_numba"])
    p.add_argument("--num-iter", type=int, default=16)
    p.add_argument("--horizon", type=int, default=5)
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--pin-after-start", help="comma-separated CPUs to pin this process to once jax has started")
    p.add_argument("--start-on", help="comma-separated CPUs: start JAX's backend from a thread restricted to them "
                                      "(XLA sizes and places its pool there; the caller stays free: the node's "
                                      "cpu_affinity parameter)")
    args = p.parse_args()
    model = load_model(MODEL)
    if args.start_on:
        import threading

        def start() -> None:
            os.sched_setaffinity(0, {int(c) for c in args.start_on.split(",")})
            jax.devices()

        t = threading.Thread(target=start)
        t.start()
        t.join()
    jax.devices()
    if args.pin_after_start:
        os.sched_setaffinity(0, {int(c) for c in args.pin_after_start.split(",")})
    print(f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r} affinity {sorted(os.sched_getaffinity(0))} "
          f"jax {jax.__version__} {jax.devices()[0].device_kind} load {os.getloadavg()[0]:.2f}")
    floor = jax.jit(lambda x: x + 1.0)
    x = jnp.ones(4)
    floor(x).block_until_ready()
    for algorithm in args.algorithms:
        ticks, labels = {"floor": lambda: floor(x)}, {"floor": "inline"}
        for v in ["pymdp"] + args.variants:
            fn = tick_callable(model, algorithm, v, args.num_iter, args.horizon, predict=False)
            _, modes = capture_modes(lambda: jax.block_until_ready(fn()))
            labels[v] = program_label(modes, "jit_")
            ticks[v] = fn
        timings = time_round_robin(ticks, rounds=args.rounds, max_time_s=60.0)
        base = timings["pymdp"].time_s
        for v, t in timings.items():
            print(f"{algorithm:4s} {v:16s} {t.time_s * 1e6:8.1f} us (median {t.median_s * 1e6:7.1f}, p90 "
                  f"{t.p90_s * 1e6:7.1f})  x{base / t.time_s:5.2f} vs pymdp  {labels[v]}")


if __name__ == "__main__":
    main()
