#!/usr/bin/env python3
"""What one agent node costs in host memory and CPU time, per variant, on the default model (config/agent.yaml).

Run inside the built workspace (loopback only; picks its own ROS_DOMAIN_ID):
    source .venv/bin/activate && source install/setup.bash && python benchmarks/node_memory.py [--seconds 10]

For each variant the node is started as ``ros2 run`` starts it (plain mode: configure + activate at once), with the
given tick rate and ``tick_without_observations: true`` (a predict-only tick every period, no publisher needed).
Once it logs ``active``, it ticks for ``--seconds``; then /proc/<pid>/status gives VmRSS (resident now), VmHWM
(peak resident, which includes the configure-time compiles) and RssAnon / RssFile (the process's own heap vs mapped
shared libraries, which other processes on the same libraries share), and /proc/<pid>/stat the CPU time used while
ticking. The node's JAX runs on the CPU (JAX_PLATFORMS=cpu unless set). ``--cold``: empty numba and JAX caches
(fresh temporary folders), so configure compiles everything and VmHWM includes LLVM's and XLA's compile memory.
Prints one JSON document on stdout.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the lab (not installed)

from lab import ros_graph  # noqa: E402

STATUS_FIELDS = ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem", "Threads")


def proc_status(pid: int) -> dict:
    """The fields of /proc/<pid>/status in STATUS_FIELDS, memory in MiB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in STATUS_FIELDS:
                value = rest.split()
                out[key] = int(value[0]) if key == "Threads" else round(int(value[0]) / 1024, 1)
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of the process so far (s)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(tmp: Path, variant: str, rate_hz: float, seconds: float, cold: bool) -> dict:
    params = ros_graph.default_params()
    params.update(variant=variant, rate_hz=rate_hz, tick_without_observations=True)
    if cold:
        os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(dir=tmp, prefix="numba_")
        params["jax_compilation_cache_dir"] = tempfile.mkdtemp(dir=tmp, prefix="jax_")
    node = ros_graph.start_agent(tmp, f"mem_{variant}", params, plain=True)
    try:
        t0 = time.monotonic()
        if not node.wait_log("active", timeout=180.0):
            raise RuntimeError(f"{variant}: the node did not become active:\n{node.log_tail()}")
        configured_s = time.monotonic() - t0
        cpu0, w0 = cpu_seconds(node.pid), time.monotonic()
        time.sleep(seconds)
        cpu1, w1 = cpu_seconds(node.pid), time.monotonic()
        row = {"variant": variant, "start_to_active_s": round(configured_s, 2),
               "cpu_share_while_ticking": round((cpu1 - cpu0) / (w1 - w0), 4), **proc_status(node.pid)}
        configured = [line for line in node.log_text().splitlines() if "configured in " in line]
        row["configured"] = configured[-1].split("]: ", 1)[-1] if configured else ""
        return row
    finally:
        node.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default="fused_numba,baseline")
    parser.add_argument("--rate-hz", type=float, default=50.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--cold", action="store_true", help="empty numba and JAX caches for each node")
    args = parser.parse_args()
    domain = ros_graph.claim_domain_id()
    ros_graph.set_loopback_env(domain)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for variant in args.variants.split(","):
            rows.append(measure(Path(tmp), variant, args.rate_hz, args.seconds, args.cold))
    import jax
    import numpy

    doc = {"machine": platform.machine(), "processor": platform.processor(), "cpus": os.cpu_count(),
           "python": platform.python_version(), "jax": jax.__version__, "numpy": numpy.__version__,
           "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS"), "rate_hz": args.rate_hz, "seconds": args.seconds,
           "caches": "cold (empty)" if args.cold else "as found (warm after a first run)",
           "memory_unit": "MiB", "rows": rows}
    json.dump(doc, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
