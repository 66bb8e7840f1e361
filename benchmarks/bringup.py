#!/usr/bin/env python3
"""Large-model bringup: a node with ``variant: auto`` (every default) against the same node pinned to ``fused_numba``,
on generated models, with numba's kernel cache warm, JAX's compilation cache empty and no decision kept: configure
time, first belief from spawn, and resident memory some seconds after the first belief.

Run inside a built workspace on an otherwise idle machine (loopback only; it picks its own ROS_DOMAIN_ID):
    source .venv/bin/activate && source install/setup.bash && python -m lab generate --ids c0771 c0690 && \\
      python benchmarks/bringup.py --out benchmarks/bringup_cpu.csv

Cases (``--cases MODEL:ALGORITHM``, default c0771:fpi c0690:fpi c0690:mmp and the default model's fpi, where auto
has a candidate to verify; a MODEL is a generator config id, its arrays in ``--cache``, or a model file), each with every ``--settings`` (default ``auto fused_numba``), ``--repeat``
times, the settings alternating; ``--agents 1 10 100`` repeats each with a fleet node of that many agents (how
configure grows with them). First, one discarded start per model warms numba's kernel cache (the user's, as a
robot's after ``bayes-infer warmup``). Per measured start: a fresh empty folder for JAX's compilation cache
(``jax_compilation_cache_dir``) and one for the decision cache (``BAYES_INFER_DECISION_CACHE``); the node starts with
autostart, ticking at 10 Hz without observations (no publisher needed). Measured: the node's own "configured in X s",
process spawn -> the first Beliefs received, and VmRSS / VmHWM of the node process ``--settle`` seconds after that
belief (its children, a verify step's process, are not counted: they exit). Each row records the 1-minute load
before and after, and ``uptime``. Writes ``--out`` (a CSV); ``lab/readme_tables.py`` renders benchmarks/README's
table from it. The targets: configure <= 2 s, first belief <= 3 s, auto's memory <= 1.15x the pinned node's.
"""
from __future__ import annotations

import argparse
import csv
import itertools
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the lab (not installed)
sys.path.insert(0, str(REPO / "test" / "ros"))

import ros_harness  # noqa: E402

CONFIGURED = re.compile(r"configured in ([0-9.]+) s")
VARIANT = re.compile(r"variant=(\w+)")
OUTCOME = re.compile(r"(keeps|swaps to) (\S+@\w+)")
FIELDS = ("when_utc", "model", "algorithm", "agents", "setting", "repeat", "variant", "configure_s", "first_belief_s",
          "rss_mib", "hwm_mib", "verify", "load_before", "load_after", "uptime", "machine")
DEFAULT_CASES = ("c0771:fpi", "c0690:fpi", "c0690:mmp", "config/agent.yaml:fpi")


def model_file(name: str, cache: Path) -> Path:
    """A model file as given, else the generator's arrays of config id ``name`` in ``cache``."""
    path = Path(name) if Path(name).is_absolute() else REPO / name
    if path.suffix in (".npz", ".yaml") and path.is_file():
        return path.resolve()
    path = cache / "npz" / f"{name}.npz"
    if not path.is_file():
        raise SystemExit(f"{path} is missing: run `python -m lab generate --ids {name}` first")
    return path.resolve()


def proc_memory(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM of ``pid`` in MiB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = round(int(rest.split()[0]) / 1024, 1)
    return out


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def start(tmp: Path, probe, path: Path, algorithm: str, setting: str, tag: str, settle_s: float,
          timeout_s: float, agents: int = 1) -> dict:
    """One node start with empty JAX and decision caches (``agents`` > 1: a fleet node of that many agents, the
    first belief is agent a0's); what it measured."""
    from bayes_infer_ros.msg import Beliefs

    run_dir = Path(tempfile.mkdtemp(dir=tmp, prefix=f"{tag}_"))
    os.environ["BAYES_INFER_DECISION_CACHE"] = str(run_dir / "decisions")
    params = {"model_file": str(path), "algorithm": algorithm, "variant": setting, "autostart": True,
              "rate_hz": 10.0, "tick_without_observations": True,
              "jax_compilation_cache_dir": str(run_dir / "jax")}
    ns = f"/bringup_{tag}"
    if agents > 1:
        params["agents"] = [f"a{i}" for i in range(agents)]
    beliefs = probe.record(f"{ns}/a0/beliefs" if agents > 1 else f"{ns}/beliefs", Beliefs, 10)
    load_before = os.getloadavg()[0]
    t0 = time.monotonic()
    proc = ros_harness.AgentProcess(run_dir, f"agent_{tag}", params, namespace=ns)
    try:
        if not ros_harness.wait_for(lambda: len(beliefs) > 0, timeout_s, period=0.002):
            raise RuntimeError(f"{tag}: no belief within {timeout_s:g} s:\n{proc.log_tail()}")
        first = beliefs[0][0] - t0
        time.sleep(settle_s)
        memory = proc_memory(proc.pid)
        log = proc.log_text()
        configured = CONFIGURED.findall(log)
        variant = VARIANT.findall(log)
        outcome = OUTCOME.findall(log)
        verify = ("verifying: not done" if "verifying" in log and not outcome else
                  f"{outcome[-1][0]} {outcome[-1][1]}" if outcome else "nothing to verify")
        return {"variant": variant[0] if variant else "", "configure_s": float(configured[0]) if configured else "",
                "first_belief_s": round(first, 3), "rss_mib": memory["VmRSS"], "hwm_mib": memory["VmHWM"],
                "verify": verify, "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2)}
    finally:
        proc.stop()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", nargs="+", default=list(DEFAULT_CASES), metavar="MODEL:ALGORITHM")
    ap.add_argument("--settings", nargs="+", default=["auto", "fused_numba"], help="variant settings to compare")
    ap.add_argument("--agents", nargs="+", type=int, default=[1],
                    help="agents per node (more than 1: a fleet node, `agents: [a0, ...]`)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--settle", type=float, default=8.0, help="seconds after the first belief to read memory")
    ap.add_argument("--cache", type=Path, default=REPO / ".cache" / "pomdp_configs", help="generator cache")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for a first belief")
    ap.add_argument("--no-warm", action="store_true", help="skip the discarded start that warms numba's cache")
    ap.add_argument("--out", type=Path, required=True, help="the CSV to write")
    args = ap.parse_args(argv)

    import rclpy

    ros_harness.set_loopback_env(ros_harness.claim_domain_id())
    cases = []
    for case in args.cases:
        name, _, algorithm = case.rpartition(":")
        cases.append((model_file(name, args.cache), Path(name).stem, algorithm))
    machine = f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}"
    rclpy.init()
    probe = ros_harness.Probe("bringup_probe")
    try:
        with tempfile.TemporaryDirectory() as tmp, open(args.out, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=FIELDS)
            writer.writeheader()
            if not args.no_warm:
                for path, name, algorithm in {(p, n, a) for p, n, a in cases}:
                    start(Path(tmp), probe, path, algorithm, "fused_numba", f"warm_{name}_{algorithm}", 0.0,
                          args.timeout)
            for i in range(args.repeat):
                for (path, name, algorithm), agents in itertools.product(cases, args.agents):
                    settings = args.settings if i % 2 == 0 else list(reversed(args.settings))
                    for setting in settings:
                        tag = f"{name}_{algorithm}_{agents}_{setting}_{i}"
                        row = {"when_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "model": name,
                               "algorithm": algorithm, "agents": agents, "setting": setting, "repeat": i,
                               "uptime": uptime(), "machine": machine,
                               **start(Path(tmp), probe, path, algorithm, setting, tag, args.settle, args.timeout,
                                       agents)}
                        writer.writerow(row)
                        f.flush()
                        print({k: row[k] for k in FIELDS[1:12]}, flush=True)
    finally:
        probe.close()
        rclpy.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
