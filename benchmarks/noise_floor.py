"""The regret floor set by measurement noise: two benchmark runs of the same configurations, compared.

If run A's fastest variant is taken as the "selection" and run B's timings as the truth, the regret that
results is what a *perfect* selector trained on run A would score against run B. No autotuner evaluated on
one run's labels can be expected to beat it by much. The script prints, over the (configuration,
algorithm) pairs timed in both runs (rows with different timestamps, i.e. really re-measured):

- the median and 90th percentile of |log(latency_B / latency_A)| per variant row (run-to-run spread);
- how often both runs agree on the fastest variant;
- the mean / median regret of A's winner under B's timings, and of B's winner under A's.

    PYTHONPATH=. python benchmarks/noise_floor.py RUN_A.csv RUN_B.csv [--metric time_s]
"""
from __future__ import annotations

import argparse
import collections
import math
from pathlib import Path

import numpy as np

from lab.harness import read_rows


def _rows(path: Path, metric: str) -> dict[tuple, tuple[float, str, float]]:
    out = {}
    for r in read_rows([path]):
        if r.get("status") != "ok" or r["variant"] == "pymdp":
            continue
        try:
            value = float(r[metric])
        except (KeyError, TypeError, ValueError):
            continue
        if math.isfinite(value) and value > 0:
            out[(r["config_id"], r["algorithm"], r["variant"])] = (value, r.get("timestamp", ""),
                                                                     float(r.get("loadavg") or "nan"))
    return out


def compare(path_a: Path, path_b: Path, metric: str = "time_s") -> dict[str, float]:
    A, B = _rows(path_a, metric), _rows(path_b, metric)
    keys = [k for k in A if k in B and A[k][1] != B[k][1]]
    if not keys:
        raise SystemExit("no row was timed in both runs")
    spread = np.abs(np.log([B[k][0] / A[k][0] for k in keys]))
    pairs: dict[tuple, dict[str, tuple[float, float]]] = collections.defaultdict(dict)
    for k in keys:
        pairs[k[:2]][k[2]] = (A[k][0], B[k][0])
    pairs = {c: d for c, d in pairs.items() if len(d) > 1}
    agree, reg_ab, reg_ba = 0, [], []
    for d in pairs.values():
        win_a = min(d, key=lambda v: d[v][0])
        win_b = min(d, key=lambda v: d[v][1])
        agree += win_a == win_b
        reg_ab.append(d[win_a][1] / d[win_b][1] - 1.0)
        reg_ba.append(d[win_b][0] / d[win_a][0] - 1.0)
    return {"rows": len(keys), "pairs": len(pairs), "spread_median": float(np.median(spread)),
            "spread_p90": float(np.quantile(spread, 0.9)), "same_winner": agree / max(len(pairs), 1),
            "regret_a_in_b_mean": float(np.mean(reg_ab)), "regret_a_in_b_median": float(np.median(reg_ab)),
            "regret_b_in_a_mean": float(np.mean(reg_ba)), "regret_b_in_a_median": float(np.median(reg_ba)),
            "load_a": float(np.nanmedian([A[k][2] for k in keys])), "load_b": float(np.nanmedian([B[k][2] for k in keys]))}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("run_a", type=Path)
    p.add_argument("run_b", type=Path)
    p.add_argument("--metric", default="time_s")
    args = p.parse_args(argv)
    r = compare(args.run_a, args.run_b, args.metric)
    print(f"{args.run_a} vs {args.run_b} ({args.metric}): {r['rows']} variant rows re-measured, "
          f"{r['pairs']} (configuration, algorithm) pairs; median 1-min load {r['load_a']:.1f} / {r['load_b']:.1f}")
    print(f"  run-to-run |log ratio| median {r['spread_median']:.3f}, p90 {r['spread_p90']:.3f}")
    print(f"  same fastest variant in both runs: {r['same_winner']:.0%}")
    print(f"  regret of A's winner under B's timings: mean {r['regret_a_in_b_mean']:.1%}, "
          f"median {r['regret_a_in_b_median']:.1%}; B's winner under A's: mean {r['regret_b_in_a_mean']:.1%}, "
          f"median {r['regret_b_in_a_median']:.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
