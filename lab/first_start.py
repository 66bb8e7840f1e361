"""The node's first start after an install, and a warm start: configure time and time to the first belief.

Run inside a built workspace (its install/ sourced; loopback only; picks its own ROS_DOMAIN_ID), with HOME /
XDG_CACHE_HOME pointing at the cache folders the install's warmup filled (or empty ones, for code without warmup):
    source .venv/bin/activate && source install/setup.bash && \\
      python -m lab first-start --label after --prepare warmup --repeat 3 --out benchmarks/first_start_cpu.jsonl

Per repetition:
1. ``--prepare``: ``clear`` empties the caches (XDG_CACHE_HOME or ~/.cache, NUMBA_CACHE_DIR, and numba's files in the
   installed package's ``__pycache__`` folders, where numba cached before the caches moved to the per-user folder);
   ``warmup`` clears, then runs ``bayes-infer warmup`` (what ``make setup`` and ``colcon build`` run), timed;
   ``none`` keeps them.
2. ``first``: the node is started with config/agent.yaml (variant auto, every default) and autostart, event-driven
   (``rate_hz`` 0) with every modality published at 50 Hz; measured: the node's own "configured in X s" and the
   seconds from process spawn to the first Beliefs received.
3. ``warm``: the same again (the caches now hold what the first start wrote).
Prints and writes one JSON document (per run, the median and the range).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lab import ros_graph

CONFIGURED = re.compile(r"configured in ([0-9.]+) s")


def cache_folders() -> list[Path]:
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
    out = [base / "bayes_infer_ros"]
    if os.environ.get("NUMBA_CACHE_DIR"):
        out.append(Path(os.environ["NUMBA_CACHE_DIR"]))
    return out


def clear_caches() -> None:
    import bayes_infer_ros

    for folder in cache_folders():
        shutil.rmtree(folder, ignore_errors=True)
    for root in bayes_infer_ros.__path__:  # numba's in-tree cache files (.nbi/.nbc) of the installed package
        for p in list(Path(root).rglob("__pycache__/*.nb[ic]")):
            p.unlink()


def warmup() -> float:
    t0 = time.monotonic()
    subprocess.run(["bayes-infer", "warmup"], check=False)
    return time.monotonic() - t0


def start(tmp: Path, probe, model, tag: str) -> dict:
    params = ros_graph.default_params()
    params.update({"rate_hz": 0.0, "autostart": True})
    first, log = ros_graph.time_to_first_belief(tmp, probe, model, f"/first_{tag}", f"agent_{tag}", params, 600)
    configured = [float(m.group(1)) for m in CONFIGURED.finditer(log)]
    variant = re.findall(r"variant=(\w+)", log)
    warnings = [line for line in log.splitlines() if "WARN" in line]
    return {"configure_s": configured[0] if configured else None,
            "first_belief_s": round(first, 3) if first is not None else None,
            "variant": variant[0] if variant else None, "warnings": warnings}


def summary(values: list) -> dict:
    values = [v for v in values if v is not None]
    if not values:
        return {}
    return {"median": round(statistics.median(values), 3), "min": min(values), "max": max(values), "n": len(values)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lab first-start", description=__doc__.split("\n\n")[0])
    ap.add_argument("--label", required=True, help="what is measured, e.g. before / after")
    ap.add_argument("--prepare", choices=("clear", "warmup", "none"), default="warmup")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None, help="also append the JSON document to this file")
    args = ap.parse_args(argv)

    import rclpy

    from bayes_infer_ros.model import model_from_parameters
    from bayes_infer_ros.model.io import flatten_parameters

    ros_graph.set_loopback_env(ros_graph.claim_domain_id())
    rclpy.init()
    model = model_from_parameters({k: v for k, v in flatten_parameters(ros_graph.default_params()).items()
                                   if k.startswith("model.")})
    probe = ros_graph.Probe("first_start_probe")
    runs = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.repeat):
                run: dict = {}
                if args.prepare in ("clear", "warmup"):
                    clear_caches()
                if args.prepare == "warmup":
                    run["warmup_s"] = round(warmup(), 2)
                run["first"] = start(Path(tmp), probe, model, f"{i}_first")
                run["warm"] = start(Path(tmp), probe, model, f"{i}_warm")
                print(json.dumps(run), flush=True)
                runs.append(run)
    finally:
        probe.close()
        rclpy.shutdown()
    out = {
        "label": args.label, "prepare": args.prepare,
        "command": " ".join(["python -m lab first-start"] + (sys.argv[1:] if argv is None else list(argv))),
        "when_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}; load {os.getloadavg()[0]:.1f}",
        "cache_folders": [str(p) for p in cache_folders()],
        "first_configure_s": summary([r["first"]["configure_s"] for r in runs]),
        "first_belief_s": summary([r["first"]["first_belief_s"] for r in runs]),
        "warm_configure_s": summary([r["warm"]["configure_s"] for r in runs]),
        "warm_belief_s": summary([r["warm"]["first_belief_s"] for r in runs]),
        "runs": runs,
    }
    print(json.dumps(out, indent=1))
    if args.out:
        with open(args.out, "a") as f:
            f.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
