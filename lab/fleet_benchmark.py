"""Many agents in one node against one process per agent: inference time per tick, CPU and resident memory.

Run inside the built workspace (loopback only; picks its own ROS_DOMAIN_ID):
    source .venv/bin/activate && source install/setup.bash && \
        python -m lab bench-fleet --one-node 1 10 100 --separate 1 10 20 --out benchmarks/fleet_cpu.csv

Each configuration runs the default model (config/agent.yaml) with a 10 Hz timer and
``tick_without_observations: true`` (every agent steps every tick), ``--variant`` (default fused_numba, the
autotuner's pick on the development VM), the JAX compilation cache warm:
- one node: ``agents: [a0 .. a{N-1}]``: one batched engine call per tick for all N agents;
- separate: N single-agent processes (a hundred of them do not fit the 24 GB development VM: the committed CSV
  stops at 20).
After ``--warm`` s it samples ``--seconds`` s: ``Beliefs.inference_ms`` (one node: the batched call, read on a0;
separate: every process's own tick), the processes' CPU time (utime + stime from /proc, as % of one core) and
VmRSS (summed over the processes). Configurations run round-robin, ``--rounds`` times; the CSV has one row per
configuration and round.
"""
from __future__ import annotations

import argparse
import csv
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from lab import ros_graph

FIELDS = ("mode", "agents", "processes", "round", "variant", "ticks_sampled", "inference_ms_median",
          "inference_ms_p90", "cpu_percent_of_one_core", "rss_mib_total", "rss_mib_per_agent", "machine")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start(folder: Path, params: dict, namespace: str):
    folder.mkdir(parents=True, exist_ok=True)
    return ros_graph.start_agent(folder, "agent", params, namespace=namespace)


def run_config(probe, tmp: Path, mode: str, n: int, args, rnd: int) -> dict:
    from bayes_infer_ros.msg import Beliefs

    base = ros_graph.default_params()
    base.update({"jax_compilation_cache_dir": str(tmp / "jax_cache"), "variant": args.variant, "rate_hz": 10.0,
                 "tick_without_observations": True, "observation_timeout": 0.0, "autostart": True})
    procs: list = []
    try:
        if mode == "one_node":
            procs.append(start(tmp / f"{mode}{n}_{rnd}", {**base, "agents": [f"a{k}" for k in range(n)]},
                               f"/fleet{n}_{rnd}"))
            topics = [f"/fleet{n}_{rnd}/a0/beliefs"]
        else:
            for k in range(n):
                procs.append(start(tmp / f"{mode}{n}_{rnd}_{k}", base, f"/sep{n}_{rnd}_{k}"))
            topics = [f"/sep{n}_{rnd}_{k}/beliefs" for k in range(n)]
        for p in procs:
            if not p.wait_log("active: tick", 600):
                raise RuntimeError(f"{p.fqn} did not start:\n{p.log_tail()}")
        bufs = [probe.record(t, Beliefs, qos=100) for t in topics]
        time.sleep(args.warm)
        marks = [len(b) for b in bufs]
        cpu0, wall0 = sum(cpu_seconds(p.pid) for p in procs), time.monotonic()
        time.sleep(args.seconds)
        cpu1, wall1 = sum(cpu_seconds(p.pid) for p in procs), time.monotonic()
        rss = sum(p.rss_bytes() for p in procs) / 2**20
        ms = np.asarray([m.inference_ms for b, k in zip(bufs, marks) for _, m in list(b)[k:]])
    finally:
        for p in procs:
            p.stop()
    return {"mode": mode, "agents": n, "processes": len(procs), "round": rnd, "variant": args.variant,
            "ticks_sampled": len(ms), "inference_ms_median": f"{np.median(ms):.4f}" if len(ms) else "",
            "inference_ms_p90": f"{np.percentile(ms, 90):.4f}" if len(ms) else "",
            "cpu_percent_of_one_core": f"{100 * (cpu1 - cpu0) / (wall1 - wall0):.1f}",
            "rss_mib_total": f"{rss:.0f}", "rss_mib_per_agent": f"{rss / n:.1f}",
            "machine": f"{platform.node()} {os.cpu_count()} cores, {platform.machine()}"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lab bench-fleet", description=__doc__.splitlines()[0])
    ap.add_argument("--one-node", type=int, nargs="*", default=[1, 10, 100])
    ap.add_argument("--separate", type=int, nargs="*", default=[1, 10, 20])
    ap.add_argument("--variant", default="fused_numba")
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--warm", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ros_graph.REPO_ROOT / "benchmarks" / "fleet_cpu.csv")
    args = ap.parse_args(argv)
    ros_graph.set_loopback_env(ros_graph.claim_domain_id())
    import rclpy

    rclpy.init()
    probe = ros_graph.Probe("fleet_bench")
    configs = [("one_node", n) for n in args.one_node] + [("separate", n) for n in args.separate]
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="fleet_bench_") as tmp:
            for rnd in range(args.rounds):
                for mode, n in configs:
                    row = run_config(probe, Path(tmp), mode, n, args, rnd)
                    print(yaml.safe_dump(row, sort_keys=False, default_flow_style=True).strip(), flush=True)
                    rows.append(row)
    finally:
        probe.close()
        rclpy.try_shutdown()
    with open(args.out, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
