"""The crossover table of a GPU sweep (``benchmarks/gpu_crossover.py``, ``python -m lab scale``).

Per algorithm and configuration: pymdp on the GPU, the best GPU candidate (every JAX variant and fused_cuda),
fused_numba on the host CPU, and the crossover: the smallest parameter count above which the best GPU candidate
beats the host CPU on every measured configuration. Where the sweep timed ``auto`` (the node's device and variant
decision, ``bench --variants ... auto``), its pick and its time over the fastest (device, variant) of the row.

    python benchmarks/gpu_crossover.py benchmarks/sweep_<device>.csv [--metric time_s] > benchmarks/crossover_<device>.md

Rows with a status other than ok are left out of the timings and listed under each algorithm's table with their
reason. The sweep's rows are round-robin timings from one process per (configuration, algorithm), so the three
columns of a line were measured side by side.
"""
from __future__ import annotations

import argparse
import csv
import math
import sys
from collections import defaultdict

HOST = {"fused_numba"}  # candidates that run on the host CPU in a GPU sweep
AUTO = "auto"  # the node's decision: not a candidate, compared with the best one


def _f(x: str) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def table(rows: list[dict], metric: str) -> dict:
    """(algorithm, config_id) -> {"params": int, "pymdp": s, "gpu": (variant, s), "cpu": s}."""
    out: dict = defaultdict(dict)
    for r in rows:
        key = (r["algorithm"], r["config_id"])
        if r["variant"] == "pymdp" and math.isfinite(_f(r.get("param_count"))):  # the model's size, timed or not
            out[key]["params"] = int(_f(r.get("param_count")))
        if r.get("status") != "ok" or not math.isfinite(_f(r.get(metric))):
            continue
        cell, t, v = out[key], _f(r[metric]), r["variant"]
        if v == "pymdp":
            cell["pymdp"] = t
        elif v == AUTO:
            cell["auto"] = (r.get("reason", "").replace("chose ", ""), t)
        elif v in HOST:
            cell["cpu"] = t
        elif "gpu" not in cell or t < cell["gpu"][1]:
            cell["gpu"] = (v, t)
    return out


def crossover(cells: list[tuple[int, dict]]) -> str:
    """The smallest parameter count from which on the best GPU candidate beats the host CPU on every larger
    configuration measured (``none``: the CPU wins the largest one)."""
    cells = sorted((p, c) for p, c in cells if "gpu" in c and "cpu" in c)
    wins = [c["gpu"][1] < c["cpu"] for _, c in cells]
    if not wins or not wins[-1]:
        return "none (the host CPU wins the largest configuration)"
    k = len(wins)
    while k > 0 and wins[k - 1]:
        k -= 1
    return f"{cells[k][0]:,} parameters ({'every configuration' if k == 0 else f'above {cells[k - 1][0]:,}'})"


def headline(rows: list[dict], metric: str = "time_s") -> dict[str, dict]:
    """algorithm -> the run's three figures: ``gpu_x`` (best GPU candidate over pymdp on the GPU, per configuration
    where both were timed), the ``crossover`` text, and ``auto`` (auto's time over the fastest (device, variant), per
    configuration where auto was timed)."""
    out: dict[str, dict] = {}
    tab = table(rows, metric)
    for alg in sorted({a for a, _ in tab}):
        cells = [(c.get("params", 0), c) for (a, _), c in tab.items() if a == alg]
        out[alg] = {
            "gpu_x": [c["pymdp"] / c["gpu"][1] for _, c in cells if "pymdp" in c and "gpu" in c],
            "crossover": crossover(cells),
            "auto": [c["auto"][1] / min(c.get("gpu", ("", math.inf))[1], c.get("cpu", math.inf))
                     for _, c in cells if "auto" in c and ("gpu" in c or "cpu" in c)],
        }
    return out


def not_timed(rows: list[dict]) -> dict[str, list[str]]:
    """algorithm -> "config variant: status (reason)" for every row that was not timed."""
    out: dict[str, list[str]] = defaultdict(list)
    for r in rows:
        if r.get("status") != "ok":
            reason = (r.get("reason") or "").split(";")[0][:120]
            out[r["algorithm"]].append(f"{r['config_id']} {r['variant']}: {r.get('status')} ({reason})")
    return out


def render(rows: list[dict], metric: str = "time_s") -> str:
    """The markdown crossover report of a sweep's rows."""
    lines: list[str] = []
    tab = table(rows, metric)
    skipped = not_timed(rows)
    devices = sorted({r.get("device", "") for r in rows})
    loads = sorted(_f(r.get("loadavg")) for r in rows if math.isfinite(_f(r.get("loadavg"))))
    lines.append(f"# GPU vs host CPU ({metric}); device {', '.join(devices)}; "
                 f"load average {loads[0] if loads else math.nan:.1f}-{loads[-1] if loads else math.nan:.1f}\n")
    for alg in sorted({a for a, _ in tab} | set(skipped)):
        cells = sorted(((c.get("params", 0), c, cid) for (a, cid), c in tab.items() if a == alg), key=lambda x: x[0])
        lines.append(f"## {alg}\n\n| config | params | pymdp (GPU) ms | best GPU | ms | x pymdp | fused_numba (CPU) ms | "
                     "GPU / CPU | auto's pick | auto / fastest |")
        lines.append("|---|---:|---:|---|---:|---:|---:|---:|---|---:|")
        for params, c, cid in cells:
            g, t = c.get("gpu", ("-", math.nan))
            pm, cpu = c.get("pymdp", math.nan), c.get("cpu", math.nan)
            pick, ta = c.get("auto", ("-", math.nan))
            lines.append(f"| {cid} | {params:,} | {pm * 1e3:.3f} | {g} | {t * 1e3:.3f} | {pm / t:.2f} | {cpu * 1e3:.3f} | "
                         f"{t / cpu:.2f} | {pick} | {ta / min(t, cpu):.2f} |")
        lines.append(f"\ncrossover ({alg}): {crossover([(pp, c) for pp, c, _ in cells])}\n")
        if skipped.get(alg):
            lines.append(f"not timed ({alg}): " + "; ".join(sorted(skipped[alg])) + "\n")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="gpu_crossover.py", description=__doc__.split("\n")[0])
    p.add_argument("csv")
    p.add_argument("--metric", default="time_s", help="time_s (p10 over rounds) or median_s")
    args = p.parse_args(argv)
    with open(args.csv, newline="") as fh:
        rows = list(csv.DictReader(fh))
    sys.stdout.write(render(rows, args.metric))
    return 0


if __name__ == "__main__":
    sys.exit(main())
