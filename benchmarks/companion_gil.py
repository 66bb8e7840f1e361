#!/usr/bin/env python3
"""What the companion node's spin thread costs the tick through the GIL.

Run inside the built workspace (loopback only):
    source .venv/bin/activate && source install/setup.bash && \
    ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST ROS_DOMAIN_ID=77 JAX_PLATFORMS=cpu \
    python benchmarks/companion_gil.py [--seconds 30] [--variant fused_numba]

The agent node serves ``switch_variant`` from a companion node spun by its own Python thread
(``bayes_infer_ros/ros/companion.py``). That thread wakes every ``period_s`` even when idle, and each
``spin_once`` runs Python (the executor's wait-set bookkeeping) with the GIL held; a tick that needs the GIL
then waits. Here the tick is the node's engine call (default model, FPI, ``engine.tick``: beliefs and the next
prior) plus the numpy it does around it, run back to back in the main thread for short phases that rotate
between: no companion, the companion spun with period 0.1 s, and with period 1.0 s (each phase restarts its
spinner; the order rotates each round). Reported per phase kind: median, p99, p99.9 and max of the tick, and
how long one idle ``spin_once`` holds the interpreter (measured alone first).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def idle_spin_once_cost(executor, n: int = 200) -> float:
    """Median seconds of one ``spin_once`` that finds nothing ready (timeout 0: the Python side only)."""
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        executor.spin_once(timeout_sec=0.0)
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--phase", type=float, default=0.5, help="seconds per phase")
    p.add_argument("--variant", default="fused_numba")
    args = p.parse_args(argv)

    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from std_srvs.srv import Trigger

    from bayes_infer_ros.autotune.select import engine_call
    from bayes_infer_ros.inference import build_inference
    from bayes_infer_ros.model import load_model
    from bayes_infer_ros.ros.spinning import SpinThread

    model = load_model(REPO / "config" / "agent.yaml")
    engine = build_inference("fpi", model.A, model.A_dependencies, model.B, model.B_dependencies,
                             variant=args.variant, num_iter=16)
    call = engine_call(engine, "fpi", 1)

    def tick():
        q, nxt = call()
        return float(np.asarray(q, np.float32).sum()) + float(np.asarray(nxt, np.float32)[0])

    for _ in range(200):
        tick()

    rclpy.init()
    node = Node("_companion_gil_services", start_parameter_services=False, enable_rosout=False)
    node.create_service(Trigger, "~/idle", lambda req, res: res)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    spin_cost = idle_spin_once_cost(executor)

    kinds = ["none", "period 0.1 s", "period 1.0 s"]
    samples: dict[str, list[float]] = {k: [] for k in kinds}
    start = time.perf_counter()
    r = 0
    while time.perf_counter() - start < args.seconds:
        order = kinds[r % 3:] + kinds[:r % 3]
        for kind in order:
            spinner = None
            if kind != "none":
                spinner = SpinThread(executor, name="companion", period_s=0.1 if "0.1" in kind else 1.0)
            t_end = time.perf_counter() + args.phase
            out = samples[kind]
            while time.perf_counter() < t_end:
                t0 = time.perf_counter()
                tick()
                out.append(time.perf_counter() - t0)
            if spinner is not None:
                spinner.stop(timeout=0.0)
                executor.wake()  # the spinner's wait returns now, not at its period
                spinner.stop(timeout=2.0)
        r += 1
    rclpy.try_shutdown()
    report = {"variant": args.variant, "seconds": args.seconds, "phase_s": args.phase, "rounds": r,
              "idle_spin_once_us": round(spin_cost * 1e6, 1), "load": round(os.getloadavg()[0], 2),
              "cpus": os.cpu_count(), "ticks": {}}
    for kind in kinds:
        xs = np.asarray(samples[kind]) * 1e6
        report["ticks"][kind] = {"n": int(xs.size), "median_us": round(float(np.median(xs)), 2),
                                 "p99_us": round(float(np.percentile(xs, 99)), 2),
                                 "p999_us": round(float(np.percentile(xs, 99.9)), 2),
                                 "max_us": round(float(xs.max()), 1)}
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
