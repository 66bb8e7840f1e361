"""Reports from benchmark CSVs (``python -m lab report``): the paper's plots and a summary table.

- ``violin_<tag>.png``: latency ratios (pymdp latency / variant latency; > 1 is a speedup) per variant, one
  panel per algorithm, the autotuner as the last violin (out-of-fold choices from ``autotune-train
  --report-dir``, so the autotuner is never scored on configurations it was trained on).
- ``params_vs_latency_<tag>.png``: parameter count vs latency, pymdp -> autotuned variant (the autotuner's
  out-of-fold choice, else the sweep's own ``auto`` row, else the fastest variant), one arrow per configuration (a
  uniform sample of at most 50, as in the paper).
- ``summary_<tag>.csv`` / ``.md``: per algorithm and variant, how many configurations ran, were skipped, and
  the median, p5 and max ratio, plus the fraction slower than pymdp.

The ratio's numerator is pymdp's jitted call; the denominator is the variant's list call (``--metric time_s``,
the round-robin statistic, default; ``median_s``, the paper's comparison), its packed call (``--metric packed_median_s``, what the node runs) or
its jitted program alone (``--metric core_median_s``: the engine's per-call Python work left out, which
is the same for every variant).
"""
from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from bayes_infer_ros.inference import ALGORITHMS, VARIANTS
from lab.harness import AUTO, PYMDP, read_rows

ORDER = list(VARIANTS)
AUTOTUNER = "autotuner"
AUTOTUNER_VERIFY = "autotuner+verify"


def _f(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


def latency_tables(rows: Sequence[dict], metric: str = "median_s"):
    """{alg: {config: {variant: seconds}}} for rows with status ok, and the matching param counts."""
    lat: dict[str, dict[str, dict[str, float]]] = {}
    params: dict[str, dict[str, dict[str, float]]] = {}
    status: dict[str, dict[str, dict[str, str]]] = {}
    for r in rows:
        alg, cfg, v = r["algorithm"], r["config_id"], r["variant"]
        status.setdefault(alg, {}).setdefault(cfg, {})[v] = r.get("status", "")
        if r.get("status") != "ok":
            continue
        # pymdp has no packed call or bare program of ours: its jitted call is timed as the list call
        col = "median_s" if v == PYMDP and metric in ("packed_median_s", "core_median_s") else metric
        val = _f(r.get(col))
        if not math.isfinite(val):
            val = _f(r.get("median_s"))
        lat.setdefault(alg, {}).setdefault(cfg, {})[v] = val
        params.setdefault(alg, {}).setdefault(cfg, {})[v] = _f(r.get("param_count"))
    return lat, params, status


def read_autotune_choices(path: Optional[Path], classifier: str = "xgboost") -> dict[tuple[str, str], dict]:
    if path is None or not Path(path).is_file():
        return {}
    with Path(path).open(newline="") as fh:
        return {(r["algorithm"], r["config_id"]): {AUTOTUNER: r.get(classifier), AUTOTUNER_VERIFY: r.get(f"{classifier}_verify")}
                for r in csv.DictReader(fh)}


def ratios(lat: dict, choices: dict) -> dict[str, dict[str, list[float]]]:
    """{alg: {variant or autotuner: [pymdp / variant, one per config]}}."""
    out: dict[str, dict[str, list[float]]] = {}
    for alg, cfgs in lat.items():
        per = out.setdefault(alg, {})
        for cfg, by_v in cfgs.items():
            base = by_v.get(PYMDP)
            if base is None or not math.isfinite(base):
                continue
            for v, t in by_v.items():
                if v != PYMDP and math.isfinite(t) and t > 0:
                    per.setdefault(v, []).append(base / t)
            for label, v in choices.get((alg, cfg), {}).items():
                if v and v in by_v and by_v[v] > 0:
                    per.setdefault(label, []).append(base / by_v[v])
    return out


def variant_order(names) -> list[str]:
    names = set(names)
    out = [v for v in ORDER if v in names]
    out += sorted(n for n in names if n not in ORDER and n not in (AUTOTUNER, AUTOTUNER_VERIFY))
    out += [n for n in (AUTOTUNER, AUTOTUNER_VERIFY) if n in names]
    return out


def summary_rows(rat: dict, status: dict) -> list[dict]:
    rows = []
    for alg in [a for a in ALGORITHMS if a in rat] + sorted(set(rat) - set(ALGORITHMS)):
        names = variant_order(set(rat[alg]) | {v for c in status.get(alg, {}).values() for v in c if v != PYMDP})
        for v in names:
            r = np.asarray(rat[alg].get(v, []), dtype=float)
            st = [c.get(v) for c in status.get(alg, {}).values() if v in c]
            rows.append({
                "algorithm": alg, "variant": v, "configs": len(r),
                "skipped": sum(s in ("skipped_memory", "skipped_compile", "skipped_time", "unsupported") for s in st),
                "failed": sum(s in ("timeout", "error") for s in st),
                "median_ratio": float(np.median(r)) if len(r) else float("nan"),
                "p5_ratio": float(np.percentile(r, 5)) if len(r) else float("nan"),
                "max_ratio": float(r.max()) if len(r) else float("nan"),
                "min_ratio": float(r.min()) if len(r) else float("nan"),
                "frac_slower": float(np.mean(r < 1.0)) if len(r) else float("nan"),
            })
    return rows


def format_table(rows: Sequence[dict]) -> str:
    def fmt(x: float, pct: bool = False) -> str:
        if not math.isfinite(x):
            return "-"
        return f"{x:.0%}" if pct else f"{x:.2f}"

    lines = ["| algorithm | variant | configs | skipped | failed | median | p5 | max | slower than pymdp |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['algorithm']} | {r['variant']} | {r['configs']} | {r['skipped']} | {r['failed']} | "
                     f"{fmt(r['median_ratio'])} | {fmt(r['p5_ratio'])} | {fmt(r['max_ratio'])} | "
                     f"{fmt(r['frac_slower'], pct=True)} |")
    return "\n".join(lines) + "\n"


def plot_violins(rat: dict, path: Path, title: str) -> None:
    # optional dependency: matplotlib (the [bench] extra), only for the plots
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # optional dependency: matplotlib

    algs = [a for a in ALGORITHMS if a in rat]
    fig, axes = plt.subplots(len(algs), 1, figsize=(11, 3.2 * len(algs)), squeeze=False)
    for ax, alg in zip(axes[:, 0], algs):
        names = [v for v in variant_order(rat[alg]) if len(rat[alg][v]) > 0]
        data = [np.log2(np.asarray(rat[alg][v])) for v in names]
        if not data:
            continue
        parts = ax.violinplot(data, showmedians=True, showextrema=True)
        for k, body in enumerate(parts["bodies"]):
            body.set_alpha(0.6)
            if names[k] in (AUTOTUNER, AUTOTUNER_VERIFY):
                body.set_facecolor("tab:red")
        ax.axhline(0.0, color="k", lw=0.8, ls="--")
        ax.set_xticks(range(1, len(names) + 1))
        ax.set_xticklabels([f"{n}\n(n={len(rat[alg][n])})" for n in names], rotation=30, ha="right", fontsize=8)
        lo = min(0.0, min(float(d.min()) for d in data))
        hi = max(0.0, max(float(d.max()) for d in data))
        ticks = np.arange(math.floor(lo), math.ceil(hi) + 1)
        ax.set_yticks(ticks)
        ax.set_yticklabels([f"{2.0 ** t:g}x" for t in ticks])
        ax.set_ylabel(f"{alg.upper()}: pymdp / variant")
    axes[0, 0].set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_params_vs_latency(lat: dict, params: dict, choices: dict, path: Path, title: str, sample: int = 50,
                           seed: int = 0) -> None:
    # optional dependency: matplotlib (the [bench] extra), only for the plots
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # optional dependency: matplotlib

    algs = [a for a in ALGORITHMS if a in lat]
    fig, axes = plt.subplots(1, len(algs), figsize=(5 * len(algs), 4.2), squeeze=False)
    rng = np.random.default_rng(seed)
    for ax, alg in zip(axes[0], algs):
        pts = []
        for cfg, by_v in lat[alg].items():
            chosen = choices.get((alg, cfg), {}).get(AUTOTUNER)
            if chosen is None and AUTO in by_v:  # the sweep timed the node's decision itself
                chosen = AUTO
            if chosen is None:  # no autotuner output: the fastest measured variant
                cands = {v: t for v, t in by_v.items() if v != PYMDP}
                chosen = min(cands, key=cands.get) if cands else None
            if chosen is None or PYMDP not in by_v or chosen not in by_v:
                continue
            pts.append((params[alg][cfg][PYMDP], by_v[PYMDP], params[alg][cfg][chosen], by_v[chosen]))
        if len(pts) > sample:
            pts = [pts[i] for i in sorted(rng.choice(len(pts), sample, replace=False))]
        for p0, t0, p1, t1 in pts:
            ax.annotate("", xy=(p1, t1 * 1e3), xytext=(p0, t0 * 1e3),
                        arrowprops=dict(arrowstyle="->", color="0.5", lw=0.7))
        if pts:
            a = np.asarray(pts)
            ax.scatter(a[:, 0], a[:, 1] * 1e3, s=14, label="pymdp", color="tab:blue")
            ax.scatter(a[:, 2], a[:, 3] * 1e3, s=14, label="autotuned variant", color="tab:red")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("parameter count (stored likelihood elements)")
        ax.set_ylabel("latency (ms)")
        ax.set_title(f"{alg.upper()} ({len(pts)} configs)")
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_summary(rows: Sequence[dict], csv_path: Path, md_path: Path, header: str = "") -> None:
    with csv_path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    md_path.write_text((header + "\n\n" if header else "") + format_table(rows))


def run_report(csvs: Sequence[Path], out_dir: Path, tag: str, metric: str = "time_s",
               autotune_choices: Optional[Path] = None, classifier: str = "xgboost", plots: bool = True) -> list[dict]:
    rows = read_rows(csvs)
    lat, params, status = latency_tables(rows, metric)
    choices = read_autotune_choices(autotune_choices, classifier)
    rat = ratios(lat, choices)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = summary_rows(rat, status)
    envs = {(r.get("machine"), r.get("device"), r.get("jax"), r.get("dtype")) for r in rows}
    loads = [_f(r.get("loadavg")) for r in rows]
    header = (f"Latency ratios pymdp / variant ({metric}); {len({r['config_id'] for r in rows})} configurations; "
              f"environments: {sorted(map(str, envs))}; 1-min load average median {np.nanmedian(loads):.1f}, "
              f"max {np.nanmax(loads):.1f}")
    if summary:
        write_summary(summary, out_dir / f"summary_{tag}.csv", out_dir / f"summary_{tag}.md", header)
    if plots and rat:
        title = f"Latency ratio pymdp / variant ({tag}, {metric})"
        plot_violins(rat, out_dir / f"violin_{tag}.png", title)
        plot_params_vs_latency(lat, params, choices, out_dir / f"params_vs_latency_{tag}.png",
                               f"Parameter count vs latency ({tag})")
    return summary


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab report", description=__doc__.split("\n")[0])
    p.add_argument("csv", nargs="+", type=Path, help="benchmark CSVs (merged; later rows win)")
    p.add_argument("--out-dir", type=Path, default=Path("benchmarks"))
    p.add_argument("--tag", default="cpu", help="suffix of the output files, e.g. cpu, h200")
    p.add_argument("--metric", default="time_s", choices=("time_s", "median_s", "packed_median_s", "core_median_s"),
                   help="the variant's latency: list call (round-robin p10, or median), packed call, or the jitted "
                        "program alone (older sweeps)")
    p.add_argument("--autotune", type=Path, help="autotune_cv_<tag>.csv from autotune-train --report-dir")
    p.add_argument("--classifier", default="xgboost", choices=("xgboost", "rf"))
    p.add_argument("--no-plots", action="store_true")
    args = p.parse_args(argv)
    summary = run_report(args.csv, args.out_dir, args.tag, args.metric, args.autotune, args.classifier,
                         plots=not args.no_plots)
    print(format_table(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
