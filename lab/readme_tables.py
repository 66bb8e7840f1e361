"""The result tables of README.md, benchmarks/README.md, docs/autotune.md and docs/gpu.md, rendered from the
committed result files.

    python -m lab readme-tables           # rewrite the marked blocks
    python -m lab readme-tables --check   # change nothing; exit 1 naming the tables that differ

Each table sits between marker comments in a markdown file::

    <!-- table:sweep -->
    ...generated...
    <!-- /table:sweep -->

``render(name, bench_dir)`` builds one table from the files in ``bench_dir`` (``benchmarks/``; the ones its
function's ``@renders`` names) and the shipped autotuner models; ``update(text, bench_dir)`` replaces every marked
block of a file's text; ``stale(path, bench_dir)`` names the blocks whose text differs from what the files give. A
block may open with a sentence of what was measured (counts, sizes, where a crossover lies): every figure in it
comes from the same files, and a test fails when a committed block and its source disagree.

Ratios are pymdp's time over the variant's (> 1: faster than pymdp), per (configuration, algorithm), summarised
over configurations: median (p5, min) for sweeps, median (worst) for the variants benchmark.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import re
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

from bayes_infer_ros.autotune.pickable import auto_variants_table
from bayes_infer_ros.autotune.select import DEFAULT_MODEL_DIR
from bayes_infer_ros.inference.registry import PAPER_VARIANTS
from lab import crossover, report
from lab.bench_check import group_of, measured_groups

ALGORITHMS = ("fpi", "vmp", "mmp")
ROOT = Path(__file__).resolve().parents[1]
FILES = (ROOT / "README.md", ROOT / "benchmarks" / "README.md", ROOT / "docs" / "autotune.md",
         ROOT / "docs" / "gpu.md")
MODEL_DIR = DEFAULT_MODEL_DIR
BLOCK = re.compile(r"(<!-- table:(?P<name>[a-z0-9_]+) -->\n)(?P<body>.*?)(<!-- /table:(?P=name) -->)", re.S)
# table name -> its markdown from the benchmarks folder; each table's function registers itself (``renders``)
TABLES: dict[str, Callable[[Path], str]] = {}


def renders(name: str, *files: str, **options: Any) -> Callable[[Callable[..., str]], Callable[..., str]]:
    """Registers the decorated function as table ``name`` of ``TABLES``, rendered by calling it with ``files``
    (names in the benchmarks folder, as paths, in order) and ``options``; the function itself is unchanged."""
    def register(table: Callable[..., str]) -> Callable[..., str]:
        TABLES[name] = lambda bench_dir: table(*(bench_dir / f for f in files), **options)
        return table
    return register


renders("auto_variants")(auto_variants_table)  # the autotuner's shipped models, rendered by the autotuner


def _rows(path: Path) -> list[dict]:
    with Path(path).open(newline="") as fh:
        return list(csv.DictReader(fh))


def _summary(path: Path) -> dict[tuple[str, str], dict]:
    """A ``python -m lab report`` summary CSV: {(algorithm, variant): row with float ratios}."""
    out = {}
    for r in _rows(path):
        out[(r["algorithm"], r["variant"])] = {k: (float(v) if k.endswith("_ratio") else v) for k, v in r.items()}
    return out


def _x(v: float) -> str:
    return "-" if not math.isfinite(v) else f"{v:.2f}x"


def _spread(r: dict) -> str:
    return f"{_x(r['median_ratio'])} ({_x(r['p5_ratio'])}, {_x(r['min_ratio'])})"


def _best_paper(summary: dict, alg: str) -> tuple[str, dict]:
    named = [(v, summary[(alg, v)]) for v in PAPER_VARIANTS if (alg, v) in summary]
    return max(named, key=lambda t: t[1]["median_ratio"] if math.isfinite(t[1]["median_ratio"]) else -1.0)


def size_text(v: float) -> str:
    """An element count as the docs write it: 60, 5.3e3, 1.3e6."""
    return f"{v:.0f}" if v < 1000 else f"{v:.1e}".replace("e+0", "e").replace("e+", "e")


def models_facts(rows: Sequence[dict]) -> dict:
    """What a benchmark CSV ran on: its configurations, strata, largest F or M, and the smallest and largest model's
    A elements (``param_count`` of pymdp's rows, "-" when the CSV has none)."""
    sizes = [float(r["param_count"]) for r in rows if r.get("variant") == report.PYMDP and r.get("param_count")]
    return {"configs": len({r["config_id"] for r in rows}), "strata": len({r["stratum"] for r in rows}),
            "max_fm": max(max(int(r["F"]), int(r["M"])) for r in rows),
            "sizes": (size_text(min(sizes)), size_text(max(sizes))) if sizes else ("-", "-")}


def sweep_caption(rows: Sequence[dict]) -> str:
    f = models_facts(rows)
    return (f"{f['configs']} configurations from {f['strata']} of the paper's 20 (F, M, regime) strata, F and M up to "
            f"{f['max_fm']}, {f['sizes'][0]} to {f['sizes'][1]} A elements. pymdp / variant, median (p5, min):")


def fastest_counts(rows: Sequence[dict], metric: str = "time_s") -> tuple[dict[str, int], int]:
    """({variant: (configuration, algorithm) pairs where it was the fastest variant}, pairs) over ok rows."""
    lat, _, _ = report.latency_tables(rows, metric)
    wins: dict[str, int] = {}
    pairs = 0
    for alg in lat:
        for by_v in lat[alg].values():
            ours = {v: t for v, t in by_v.items() if v != report.PYMDP and math.isfinite(t)}
            if ours:
                pairs += 1
                best = min(ours, key=ours.get)
                wins[best] = wins.get(best, 0) + 1
    return wins, pairs


@renders("sweep", "summary_engine_cpu.csv", "sweep_engine_cpu.csv")
@renders("sweep_m125", "summary_engine_m125_cpu.csv", "sweep_engine_m125_cpu.csv", autotuner=False)
def sweep_table(summary_csv: Path, sweep_csv: Path, autotuner: bool = True) -> str:
    """What the sweep ran on, then per algorithm: baseline, the best of the paper's variants, fused_numba and
    (``autotuner``) ``variant: auto`` as shipped (out-of-fold, top 3 + baseline timed), each median (p5, min) of
    pymdp / variant, and how often fused_numba was the fastest variant."""
    s = _summary(summary_csv)
    rows = _rows(sweep_csv)
    head = "| algorithm | configurations | baseline | best of the paper's variants | fused_numba |"
    rule = "|---|---|---|---|---|"
    if autotuner:
        head, rule = head + " `variant: auto` |", rule + "---|"
    lines = [sweep_caption(rows), "", head, rule]
    for alg in ALGORITHMS:
        name, paper = _best_paper(s, alg)
        numba = s[(alg, "fused_numba")]
        cells = [alg, str(numba["configs"]), _spread(s[(alg, "baseline")]), f"{name} {_spread(paper)}",
                 f"**{_spread(numba)}**"]
        if autotuner:
            cells.append(_spread(s[(alg, report.AUTOTUNER_VERIFY)]))
        lines.append("| " + " | ".join(cells) + " |")
    wins, pairs = fastest_counts(rows)
    numba_wins = wins.get("fused_numba", 0)
    others = ", ".join(f"{v} {n}" for v, n in sorted(wins.items()) if v != "fused_numba")
    lines.append("")
    lines.append(f"fused_numba is the fastest variant on {numba_wins} of {pairs} (configuration, algorithm) pairs"
                 + (f" (the others: {others})." if others else "."))
    return "\n".join(lines) + "\n"


@renders("variants", "variants_cpu.csv")
def variants_table(variants_csv: Path) -> str:
    """The variants benchmark's models, then its packed call (what the node runs): pymdp / variant, median (worst),
    per algorithm."""
    rows = _rows(variants_csv)
    lat, _, status = report.latency_tables(rows, "packed_median_s")
    s = {(r["algorithm"], r["variant"]): r for r in report.summary_rows(report.ratios(lat, {}), status)}
    f = models_facts(rows)
    lines = [f"{f['configs']} generator models, {f['sizes'][0]} to {f['sizes'][1]} A elements, F and M up to "
             f"{f['max_fm']}. The packed call, pymdp / variant, median (worst):", "",
             "| algorithm | models | baseline | best of the paper's variants | fused_dense | fused_pairwise | fused_numba |",
             "|---|---|---|---|---|---|---|"]
    cell = lambda r: f"{_x(r['median_ratio'])} ({_x(r['min_ratio'])})"  # noqa: E731
    for alg in ALGORITHMS:
        name, paper = _best_paper(s, alg)
        lines.append(f"| {alg} | {s[(alg, 'fused_numba')]['configs']} | {cell(s[(alg, 'baseline')])} | "
                     f"{name} {cell(paper)} | {cell(s[(alg, 'fused_dense')])} | {cell(s[(alg, 'fused_pairwise')])} | "
                     f"**{cell(s[(alg, 'fused_numba')])}** |")
    wins, pairs = fastest_counts(rows, "packed_median_s")
    lines += ["", f"fused_numba's packed call is the fastest variant on {wins.get('fused_numba', 0)} of {pairs} "
                  "(model, algorithm) pairs."]
    return "\n".join(lines) + "\n"


@renders("gpu_h100", "summary_nvidia_h100_80gb_hbm3.csv", "variants_nvidia_h100_80gb_hbm3.csv")
def gpu_table(summary_csv: Path, variants_csv: Path) -> str:
    """A GPU run's models, then its list call: pymdp / variant, median over its models, for a few variants."""
    s = _summary(summary_csv)
    f = models_facts(_rows(variants_csv))
    names = ("baseline", "clustered_end_to_end", "fused_dense", "fused_pairwise", "fused_numba")
    lines = [f"{f['configs']} models, {f['sizes'][0]} to {f['sizes'][1]} A elements. List call, pymdp / variant, "
             "median over the models:", "", "| algorithm | models | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for alg in ALGORITHMS:
        lines.append(f"| {alg} | {s[(alg, 'baseline')]['configs']} | "
                     + " | ".join(_x(s[(alg, v)]["median_ratio"]) for v in names) + " |")
    return "\n".join(lines) + "\n"


@renders("unseen", "unseen_vs_baseline_cpu.csv")
@renders("unseen_portable", "unseen_vs_baseline_portable_cpu.csv")
def unseen_table(unseen_csv: Path) -> str:
    """``variant: auto`` on unseen models (``python -m lab bench-unseen``): how many verify steps ran and swapped,
    what it ended on, that run's time over baseline's and over the fastest candidate's (timed again afterwards), and
    what configure waits for (the plan and the start's build)."""
    rows = _rows(unseen_csv)
    f = models_facts(rows)
    lines = [f"{f['configs']} models from another generator seed, F and M up to {f['max_fm']}:", "",
             "| algorithm | models | verify steps | swaps | ends on | run / baseline: median | worst | "
             "run / fastest candidate: worst | configure s: median | max |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for alg in ALGORITHMS:
        rs = [r for r in rows if r["algorithm"] == alg]
        if not rs:
            continue
        runs: dict[str, int] = {}
        for r in rs:
            runs[r["run"]] = runs.get(r["run"], 0) + 1
        ratio = np.array([float(r["run_over_baseline"]) for r in rs])
        fastest = np.array([float(r["run_over_fastest"]) for r in rs])
        conf = np.array([float(r["configure_s"]) for r in rs])
        lines.append(f"| {alg} | {len(rs)} | {sum(bool(r['verified']) for r in rs)} | "
                     f"{sum(int(r['swap']) for r in rs)} | " + ", ".join(f"{v} {n}" for v, n in sorted(runs.items()))
                     + f" | {np.median(ratio):.2f} | {ratio.max():.2f} | {fastest.max():.2f} | {np.median(conf):.2f} | "
                       f"{conf.max():.2f} |")
    return "\n".join(lines) + "\n"


@renders("regret")
def regret_table(model_dir: Path = MODEL_DIR) -> str:
    """Out-of-fold mean regret of the shipped models (their meta files), per algorithm."""
    cpu = json.loads((Path(model_dir) / "cpu_meta.json").read_text())["algorithms"]
    port = json.loads((Path(model_dir) / "cpu_portable_meta.json").read_text())["algorithms"]
    pct = lambda v: f"{100 * v:.1f}%"  # noqa: E731
    lines = ["| algorithm | configurations | `cpu` (with numba) | its model | `cpu_portable`: XGBoost + guard "
             "| + verify top 3 | always baseline (without numba) |", "|---|---|---|---|---|---|---|"]
    for alg in ALGORITHMS:
        c, p = cpu[alg], port[alg]
        model = f"constant `{c['constant']}`" if "constant" in c else "XGBoost"
        lines.append(f"| {alg} | {c['configs']} | {pct(c['regret_xgboost_verify3'])} | {model} | "
                     f"{pct(p['regret_xgboost'])} | {pct(p['regret_xgboost_verify3'])} | "
                     f"{pct(p['regret_always_baseline'])} |")
    return "\n".join(lines) + "\n"


@renders("readme_speed", "summary_engine_cpu.csv", "variants_cpu.csv", "sweep_engine_cpu.csv")
def readme_speed_table(summary_csv: Path, variants_csv: Path, sweep_csv: Path) -> str:
    """README's table: what both benchmarks ran on, the sweep's fused_numba and ``variant: auto``, the variants
    benchmark's packed fused_numba."""
    s = _summary(summary_csv)
    rows = _rows(variants_csv)
    lat, _, status = report.latency_tables(rows, "packed_median_s")
    v = {(r["algorithm"], r["variant"]): r for r in report.summary_rows(report.ratios(lat, {}), status)}
    sweep, dozen = models_facts(_rows(sweep_csv)), models_facts(rows)
    lines = [f"pymdp 1.0.4's time over ours on the 2-core development VM, both in one process, round-robin: on "
             f"{sweep['configs']} generated models from {sweep['strata']} of the paper's 20 strata (F and M up to "
             f"{sweep['max_fm']}), median (p5, min), and on {dozen['configs']} models from {dozen['sizes'][0]} to "
             f"{dozen['sizes'][1]} A elements (`make bench`), median (worst):", "",
             "| algorithm | generated models: `variant: auto` | fused_numba | baseline (JAX) "
             f"| {dozen['configs']} models: fused_numba |", "|---|---|---|---|---|"]
    for alg in ALGORITHMS:
        r = v[(alg, "fused_numba")]
        lines.append(f"| {alg} | **{_spread(s[(alg, report.AUTOTUNER_VERIFY)])}** | {_spread(s[(alg, 'fused_numba')])}"
                     f" | {_spread(s[(alg, 'baseline')])} | {_x(r['median_ratio'])} (worst {_x(r['min_ratio'])}) |")
    return "\n".join(lines) + "\n"


def _median(rows: Sequence[dict], key: str, **match: object) -> float:
    xs = [float(r[key]) for r in rows if all(str(r[k]) == str(v) for k, v in match.items())]
    return float(np.median(xs)) if xs else math.nan


def _num(v: float, fmt: str) -> str:
    return "-" if not math.isfinite(v) else format(v, fmt)


@renders("fleet", "fleet_cpu.csv")
def fleet_table(fleet_csv: Path) -> str:
    """Many agents of one model: one node with an engine row per agent against one process per agent (medians over
    the rounds of ``python -m lab bench-fleet``)."""
    rows = _rows(fleet_csv)
    lines = ["| agents | one node: `inference_ms` per tick, all agents | one node: VmRSS | one process per agent: "
             "`inference_ms` each | one process per agent: VmRSS, all |", "|---|---|---|---|---|"]
    for n in sorted({int(r["agents"]) for r in rows}):
        cells = [_num(_median(rows, "inference_ms_median", mode="one_node", agents=n), ".3f"),
                 _num(_median(rows, "rss_mib_total", mode="one_node", agents=n), ".0f") + " MiB",
                 _num(_median(rows, "inference_ms_median", mode="separate", agents=n), ".3f"),
                 _num(_median(rows, "rss_mib_total", mode="separate", agents=n), ".0f") + " MiB"]
        lines.append(f"| {n} | " + " | ".join(c.replace("- MiB", "-") for c in cells) + " |")
    return "\n".join(lines) + "\n"


@renders("call_floor", "call_floor_cpu.csv")
def call_floor_table(floor_csv: Path) -> str:
    """fused_numba's FPI list call over its bare kernel, layer by layer (``benchmarks/call_floor.py``): each column
    what one layer adds to the one before it, from the medians over rounds of each layer's paired difference to the
    bare kernel; then the floors (no work behind the call's form)."""
    rows = {(r["model"], r["candidate"]): r for r in _rows(floor_csv)}
    models = list(dict.fromkeys(m for m, _ in rows))
    layers = ("gather", "gather_views", "closure", "list")
    lines = ["| model | arrays (M + F) | bare kernel us | + unbox and gather | + F views | + checks, closure | "
             "+ `Engine.__call__` | list call over bare | floor: an instance call | floor: F views | load |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for m in models:
        over = [0.0] + [float(rows[m, c]["over_bare_us"]) for c in layers]
        bare = rows[m, "bare"]
        arrays = int(bare["modalities"]) + int(bare["factors"])
        steps = [f"{b - a:+.2f}" for a, b in zip(over, over[1:])]
        lines.append(f"| {m} | {arrays} | {float(bare['median_us']):.2f} | " + " | ".join(steps)
                     + f" | **{over[-1]:+.2f}** | {float(rows[m, 'noop_instance_call']['median_us']):.2f} | "
                     f"{float(rows[m, 'views']['median_us']):.2f} | {bare['load']} |")
    return "\n".join(lines) + "\n"


@renders("agents_throughput", "agents_throughput_cpu.csv")
@renders("agents_throughput_h200", "agents_throughput_nvidia_h200.csv")
def agents_table(throughput_csv: Path) -> str:
    """Agent-ticks per second of the default model's FPI tick by batch size b, per candidate (median over rounds)."""
    rows = _rows(throughput_csv)
    names = list(dict.fromkeys(r["candidate"] for r in rows))
    lines = ["| b | " + " | ".join(f"`{n}`" for n in names) + " |", "|---:|" + "---:|" * len(names)]
    for b in sorted({int(r["b"]) for r in rows}):
        lines.append(f"| {b} | " + " | ".join(_num(_median(rows, "agent_ticks_per_s", candidate=n, b=b), ".2g")
                                              for n in names) + " |")
    return "\n".join(lines) + "\n"


def _cost_cell(r: dict) -> str:
    return (f"{float(r['tick_median_us']):.2f} -> {float(r['evidence_median_us']):.2f} us "
            f"({float(r['cost_us']):+.2f} us, {100 * float(r['cost_ratio']):+.0f}%)")


# README's columns of the free-energy cost: (algorithm, variant, heading)
# (fused_numba: what `variant: auto` runs on a CPU; every engine, cold calls too: benchmarks/README.md)
FREE_ENERGY_README = (("fpi", "fused_numba", "fused_numba fpi (the node's tick)"), ("vmp", "fused_numba", "fused_numba vmp"),
                      ("mmp", "fused_numba", "fused_numba mmp"))
COST_MODES = (("hot", "back to back"), ("cold", "caches evicted before each call"))


@renders("free_energy_cost", "free_energy_cost_cpu.csv")
def free_energy_table(cost_csv: Path, columns: Sequence[tuple[str, str, str]] = FREE_ENERGY_README,
                      modes: Sequence[tuple[str, str]] = COST_MODES[:1]) -> str:
    """``benchmarks/free_energy_cost.py``'s output: the tick alone -> with its evidence (free energy, surprise, gates),
    median us and the difference, per mode (rows; README: back to back) and (algorithm, engine) (columns)."""
    rows = {(r["mode"], r["algorithm"], r["variant"]): r for r in _rows(cost_csv)}
    load = max((float(r["load"]) for r in rows.values()), default=math.nan)
    lines = [f"| the evidence's cost (`benchmarks/free_energy_cost.py`; default model, float32, load {load:g}) | "
             + " | ".join(h for _, _, h in columns) + " |",
             "|---|" + "---:|" * len(columns)]
    for mode, label in modes:
        cells = [_cost_cell(rows[(mode, a, v)]) if (mode, a, v) in rows else "-" for a, v, _ in columns]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


@renders("free_energy_cost_full", "free_energy_cost_cpu.csv")
def free_energy_full_table(cost_csv: Path) -> str:
    """Every row of ``benchmarks/free_energy_cost.py``'s output: tick -> with evidence, p10-p90, per mode."""
    lines = ["| mode | algorithm | engine | tick: median (p10-p90) us | with evidence: median (p10-p90) us | cost |",
             "|---|---|---|---:|---:|---:|"]
    for r in _rows(cost_csv):
        lines.append(f"| {r['mode']} | {r['algorithm']} | {r['variant']} | {float(r['tick_median_us']):.2f} "
                     f"({float(r['tick_p10_us']):.2f}-{float(r['tick_p90_us']):.2f}) | "
                     f"{float(r['evidence_median_us']):.2f} ({float(r['evidence_p10_us']):.2f}-"
                     f"{float(r['evidence_p90_us']):.2f}) | {float(r['cost_us']):+.2f} us "
                     f"({100 * float(r['cost_ratio']):+.0f}%) |")
    return "\n".join(lines) + "\n"


LATENCY_LINE = re.compile(r"^(?P<alg>fpi|vmp|mmp)\s+(?P<name>\S+)\s+median\s+(?P<median>[0-9.]+) us\s+p10\s+(?P<p10>[0-9.]+)"
                          r"\s+p90\s+(?P<p90>[0-9.]+)", re.M)


def latency_medians(path: Path) -> dict[tuple[str, str], float]:
    """``benchmarks/gpu_ticks.py time``'s output: {(algorithm, name): median microseconds} (``name:tick``: the
    node's fpi tick through the engine's ``step``)."""
    return {(m["alg"], m["name"]): float(m["median"]) for m in LATENCY_LINE.finditer(Path(path).read_text())}


H200_LATENCY = (("pymdp (GPU)", "pymdp", "pymdp"), ("fused_dense (GPU)", "fused_dense", "fused_dense"),
                ("fused_cuda (GPU, one launch)", "fused_cuda", "fused_cuda"),
                ("fused_numba (host CPU)", "fused_numba", "fused_numba"))


@renders("gpu_latency_h200", "default_model_latency_fused_cuda_nvidia_h200.txt", names=H200_LATENCY)
def gpu_latency_table(path: Path, names: Sequence[tuple[str, str, str]]) -> str:
    """The default model per call on a GPU host, from one ``gpu_ticks.py time`` run (every column timed round-robin
    in one process): median microseconds of each (column title, name, fpi name) and pymdp / it."""
    med = latency_medians(path)
    lines = ["| default model | " + " | ".join(t for t, _, _ in names) + " |", "|---|" + "---:|" * len(names)]
    for alg in ALGORITHMS:
        cells = []
        for _, name, fpi_name in names:
            t = med.get((alg, fpi_name if alg == "fpi" else name), math.nan)
            base = med.get((alg, "pymdp"), math.nan)
            cells.append("-" if not math.isfinite(t) else f"{t:.0f} us ({_x(base / t)})")
        lines.append(f"| {alg} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


@renders("gpu_variants_h200", "default_model_latency_nvidia_h200.txt")
def latency_rows_table(path: Path) -> str:
    """Every candidate of one ``gpu_ticks.py time`` run, a row each: median microseconds per call (fpi: the inference
    call, and with ``tick`` the node's whole tick, its host round trip included) and pymdp / it."""
    med = latency_medians(path)
    names = list(dict.fromkeys(n.split(":")[0] for _, n in med))
    cols = [("fpi", ""), ("fpi", ":tick"), ("vmp", ""), ("mmp", "")]
    lines = ["| candidate | fpi call | fpi tick | vmp | mmp |", "|---|---:|---:|---:|---:|"]
    for name in names:
        cells = []
        for alg, suffix in cols:
            t, base = med.get((alg, name + suffix), math.nan), med.get((alg, "pymdp"), math.nan)
            cells.append("-" if not math.isfinite(t) else f"{t:.0f} us ({_x(base / t)})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


FLOOR_LINE = re.compile(r"^(?P<name>.+?)\s+median\s+(?P<median>[0-9.]+) us\s+p10\s+(?P<p10>[0-9.]+)\s+p90\s+(?P<p90>[0-9.]+)",
                        re.M)


@renders("launch_floor_h200", "launch_floor_nvidia_h200.txt")
def launch_floor_table(path: Path) -> str:
    """``benchmarks/launch_floor.py``'s output: each trivial GPU call with its synchronisation, median (p10-p90) us."""
    lines = ["| one call, synchronised | median us | p10-p90 us |", "|---|---:|---:|"]
    for m in FLOOR_LINE.finditer(Path(path).read_text()):
        lines.append(f"| {m['name'].strip()} | {float(m['median']):.0f} | {float(m['p10']):.0f}-{float(m['p90']):.0f} |")
    return "\n".join(lines) + "\n"


@renders("first_start", "first_start_cpu.jsonl")
def first_start_table(jsonl: Path) -> str:
    """``python -m lab first-start``'s runs, one a line: the node's "configured in" and spawn -> first Beliefs, first
    start (after the caches were cleared, and warmed by ``bayes-infer warmup`` for "after") and warm start, median
    (min-max) seconds over the run's repetitions, with the machine's load."""
    def cell(stat: dict) -> str:
        return f"{stat['median']:.2f} ({stat['min']:.2f}-{stat['max']:.2f})"

    lines = ["| when (UTC) | caches | load | runs | first: configured in s | first: first belief s | warm: configured in s "
             "| warm: first belief s |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for line in Path(jsonl).read_text().splitlines():
        r = json.loads(line)
        caches = "warmed by `bayes-infer warmup`" if r["prepare"] == "warmup" else "empty (before warmup existed)"
        load = r["machine"].rsplit("load ", 1)[-1]
        lines.append(f"| {r['when_utc']} | {caches} | {load} | {r['first_configure_s']['n']} | "
                     f"{cell(r['first_configure_s'])} | {cell(r['first_belief_s'])} | {cell(r['warm_configure_s'])} | "
                     f"{cell(r['warm_belief_s'])} |")
    return "\n".join(lines) + "\n"


def gpu_crossover(throughput_csv: Path) -> tuple[Optional[int], list[int]]:
    """(the smallest b from which the GPU's best candidate beats the host CPU's best in agent-ticks per second at
    every measured b, or None; the measured b), from ``benchmarks/agents_throughput.py --gpu``'s CSV."""
    best: dict[tuple[int, str], float] = {}
    for r in _rows(throughput_csv):
        key = (int(r["b"]), "cpu" if r["device"] == "cpu" else "gpu")
        best[key] = max(best.get(key, 0.0), float(r["agent_ticks_per_s"]))
    measured = sorted({b for b, _ in best})
    gpu_wins = [b for b in measured if best.get((b, "gpu"), 0.0) > best.get((b, "cpu"), 0.0)]
    from_b = next((b for b in measured if all(c in gpu_wins for c in measured if c >= b)), None)
    return from_b, measured


@renders("gpu_summary_h200", "default_model_latency_fused_cuda_nvidia_h200.txt", "agents_throughput_nvidia_h200.csv")
def gpu_summary(latency_txt: Path, throughput_csv: Path) -> str:
    """Where the default model's FPI tick is fastest (``gpu_ticks.py time``: the host CPU's fused_numba tick against
    the fastest GPU call) and from how many agents per call the GPU wins."""
    med = latency_medians(latency_txt)
    cpu = med[("fpi", "fused_numba:tick")]
    gpu_name, gpu = min(((n, t) for (alg, n), t in med.items() if alg == "fpi" and not n.startswith("fused_numba")),
                        key=lambda nt: nt[1])
    where = "on the host CPU" if cpu < gpu else "on the GPU"
    from_b, measured = gpu_crossover(throughput_csv)
    line = (f"One process, round-robin: the default model's FPI tick is fastest {where} (fused_numba's tick "
            f"{cpu:.0f} us; the fastest GPU call, {gpu_name.split(':')[0]}'s, {gpu:.0f} us); ")
    if from_b is None:
        return line + f"the GPU does not beat the host CPU up to {measured[-1]} agents per call.\n"
    return line + (f"from {from_b} agents per call (of b = {', '.join(map(str, measured))}) the GPU's agent-ticks per "
                   "second beat the host CPU's.\n")


@renders("gpu_scale_h200", "sweep_scale_nvidia_h200.csv")
def gpu_scale_table(sweep_csv: Path) -> str:
    """``python -m lab scale``'s run on a GPU, per algorithm: the best GPU candidate over pymdp on the same GPU
    (median, range), the model size from which the GPU beats fused_numba on the host CPU, and ``auto`` against the
    fastest (device, variant); ``time_s`` (p10 over the round-robin's rounds) throughout."""
    rows = _rows(sweep_csv)
    heads = crossover.headline(rows)
    params = sorted({int(float(r["param_count"])) for r in rows if r["variant"] == "pymdp" and r.get("param_count")})
    status: dict[str, int] = {}
    for r in rows:
        status[r["status"]] = status.get(r["status"], 0) + 1
    configs = len({r["config_id"] for r in rows})
    out = [f"The paper's scale in one device call (`python -m lab scale`, round-robin per (configuration, algorithm), "
           f"p10 times): {configs} configurations of {params[0]:,} to {params[-1]:,} parameters, {len(rows)} "
           "(configuration, algorithm, candidate) rows: "
           + ", ".join(f"{n} {s}" for s, n in sorted(status.items(), key=lambda sn: -sn[1])) + ".",
           "| algorithm | configurations with pymdp and a GPU candidate timed | best GPU / pymdp (GPU): median (range) "
           "| the GPU beats the host CPU from | auto within 5% of the fastest |",
           "|---|---:|---|---|---|"]
    for alg in ALGORITHMS:
        h = heads.get(alg)
        if h is None:
            continue
        gx, au = sorted(h["gpu_x"]), sorted(h["auto"])
        gcell = f"{np.median(gx):.2f}x ({gx[0]:.2f}-{gx[-1]:.2f}x)" if gx else "-"
        acell = (f"{sum(a <= 1.05 for a in au)} of {len(au)} ({au[0]:.2f}-{au[-1]:.2f}x the fastest)"
                 if au else "not timed")
        out.append(f"| {alg} | {len(gx)} of {configs} | {gcell} | {h['crossover']} | {acell} |")
    return "\n".join(out) + "\n"


#: benchmarks/bringup.py's targets: configure and first belief in seconds, auto's memory over the pinned node's.
BRINGUP_TARGETS = {"configure_s": 2.0, "first_belief_s": 3.0, "memory_ratio": 1.15}


@renders("bringup", "bringup_cpu.csv")
def bringup_table(path: Path) -> str:
    """``benchmarks/bringup.py``'s starts: per model, algorithm and setting, the median configure time, spawn -> first
    belief and resident memory (with auto's over the pinned node's), what the verify step did, and the load."""
    rows = _rows(path)
    groups: dict[tuple[str, str, str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["model"], r["algorithm"], r["agents"], r["setting"]), []).append(r)

    def med(rs: Sequence[dict], key: str) -> float:
        return float(np.median([float(r[key]) for r in rs]))

    def mark(ok: bool, setting: str) -> str:
        return "" if ok or setting == "fused_numba" else " (over target)"  # the pinned node is the reference

    lines = ["| model | algorithm | agents | setting | starts | configure s | first belief s (from spawn) | "
             "resident MiB | vs pinned | verify step | load (1 min) |",
             "|---|---|---:|---|---:|---:|---:|---:|---:|---|---|"]
    for (model, alg, agents, setting), rs in groups.items():
        pinned = groups.get((model, alg, agents, "fused_numba"))
        ratio = med(rs, "rss_mib") / med(pinned, "rss_mib") if pinned else float("nan")
        conf, first = med(rs, "configure_s"), med(rs, "first_belief_s")
        loads = [float(r[k]) for r in rs for k in ("load_before", "load_after")]
        verify = ", ".join(sorted({r["verify"] for r in rs}))
        lines.append(f"| {model} | {alg} | {agents} | `{setting}` | {len(rs)} | "
                     f"{conf:.2f}{mark(conf <= BRINGUP_TARGETS['configure_s'], setting)} | "
                     f"{first:.2f}{mark(first <= BRINGUP_TARGETS['first_belief_s'], setting)} | {med(rs, 'rss_mib'):.0f} | "
                     f"{'-' if not pinned else f'{ratio:.2f}x'}"
                     f"{mark(not pinned or ratio <= BRINGUP_TARGETS['memory_ratio'], setting)} | "
                     f"{verify} | {min(loads):.1f}-{max(loads):.1f} |")
    return "\n".join(lines) + "\n"


COMPILE_COLUMNS = ("pymdp", "baseline", "hybrid", "clustered_hybrid", "hybrid_block", "clustered_hybrid_block",
                   "clustered_end_to_end", "fused_dense", "fused_pairwise")
_SHORT_STATUS = {"unsupported": "refused", "timeout": "timeout", "error": "error"}


def _first_call(row: dict | None) -> str:
    if row is None:
        return ""
    if row.get("status") != "ok":
        return _SHORT_STATUS.get(row.get("status", ""), row.get("status", ""))
    return f"{float(row['first_call_s']):.1f}"


def compile_caption(rows: Sequence[dict], merged: Sequence[str]) -> str:
    """One sentence: the merged variants' first calls per number of modalities (range, and the slowest case) and
    pymdp's."""
    def ok(r: dict) -> bool:
        return r.get("status") == "ok" and bool(r.get("first_call_s"))

    parts = []
    for m in sorted({int(r["M"]) for r in rows}):
        mine = [r for r in rows if int(r["M"]) == m and r["variant"] in merged and ok(r)]
        ref = [float(r["first_call_s"]) for r in rows if int(r["M"]) == m and r["variant"] == "pymdp" and ok(r)]
        if not mine:
            continue
        t = sorted(float(r["first_call_s"]) for r in mine)
        worst = max(mine, key=lambda r: float(r["first_call_s"]))
        parts.append(f"at M = {m}, {t[0]:.1f}-{t[-1]:.1f} s (the slowest: {worst['variant']}'s {worst['algorithm']} on "
                     f"{worst['config_id']})" + (f" against pymdp's {min(ref):.1f}-{max(ref):.1f} s" if ref else ""))
    return "The merged variants' first calls: " + "; ".join(parts) + ".\n"


@renders("compile_times", "compile_times_cpu.csv")
def compile_table(compile_csv: Path, columns: Sequence[str] = COMPILE_COLUMNS) -> str:
    """``python -m lab compile-times``: the first call (trace + compile + one run, a fresh process each) in seconds,
    per configuration and algorithm; "refused": the variant does not build the model. The load average is the
    1-minute one before each case (range over the line's cases)."""
    rows = _rows(compile_csv)
    by = {(r["config_id"], r["algorithm"], r["variant"]): r for r in rows}
    lines = [compile_caption(rows, [c for c in columns if c not in ("pymdp", "baseline")]),
             "| configuration | algorithm | " + " | ".join(columns) + " | load |",
             "|---|---|" + "---:|" * len(columns) + "---:|"]
    configs = list(dict.fromkeys(r["config_id"] for r in rows))
    for cfg in configs:
        first = next(r for r in rows if r["config_id"] == cfg)
        for alg in ALGORITHMS:
            cells = [by.get((cfg, alg, v)) for v in columns]
            if not any(cells):
                continue
            loads = [float(c["loadavg_before"]) for c in cells if c and c.get("loadavg_before")]
            load = f"{min(loads):.1f}-{max(loads):.1f}" if loads else ""
            lines.append(f"| {cfg} (F = {first['F']}, M = {first['M']}) | {alg} | "
                         + " | ".join(_first_call(c) for c in cells) + f" | {load} |")
    return "\n".join(lines) + "\n"


@renders("compile_ab", "compile_ab_cpu.csv")
def compile_ab_table(ab_csv: Path) -> str:
    """``benchmarks/compile_ab.py``: each case's first call, XLA compile and optimised-HLO operations before -> after
    (the two revisions' cases back to back, fresh processes)."""
    rows = _rows(ab_csv)
    revisions = list(dict.fromkeys(r["revision"] for r in rows))
    before, after = revisions[0], revisions[-1]
    by = {(r["revision"], r["config_id"], r["algorithm"], r["variant"]): r for r in rows}
    lines = ["| configuration | algorithm | variant | first call s | XLA compile s | HLO operations | load |",
             "|---|---|---|---:|---:|---:|---:|"]
    for cfg, alg, v in dict.fromkeys((r["config_id"], r["algorithm"], r["variant"]) for r in rows):
        b, a = by.get((before, cfg, alg, v)), by.get((after, cfg, alg, v))
        if b is None or a is None:
            continue

        def pair(key: str, fmt: str) -> str:
            if b.get("status") != "ok" or a.get("status") != "ok":
                return f"{_first_call(b)} -> {_first_call(a)}"
            return f"{float(b[key]):{fmt}} -> {float(a[key]):{fmt}}"

        load = f"{float(b['loadavg_before']):.1f} / {float(a['loadavg_before']):.1f}"
        lines.append(f"| {cfg} (M = {a['M']}) | {alg} | {v} | {pair('first_call_s', '.1f')} | "
                     f"{pair('compile_s', '.1f')} | {pair('hlo_ops', '.0f')} | {load} |")
    return "\n".join(lines) + "\n"


@renders("holdout", "holdout_cpu.csv")
def holdout_table(holdout_csv: Path) -> str:
    """fused_numba against pymdp on unseen generated models (``python -m lab bench-holdout``): per algorithm, the median
    and the worst of pymdp's time over ours, for the packed call and the list call."""
    from lab.holdout_benchmark import table

    rows = _rows(holdout_csv)
    seed, loads = rows[0]["seed"], [float(r["load"]) for r in rows]
    caption = (f"{len({r['config'] for r in rows})} unseen models (generator seed {seed}, one per stratum with F, M "
               f"<= 25), pymdp 1.0.4 / fused_numba, the per-round ratio's median; load {min(loads):.2f}-"
               f"{max(loads):.2f}:\n\n")
    return caption + table(rows)


@renders("fleet_contention", "fleet_contention_cpu.csv")
def fleet_contention_table(csv_path: Path) -> str:
    """The fleet's step of b agents beside busy loops: agent-ticks per second and times one thread, per candidate
    (``benchmarks/fleet_contention.py``)."""
    rows = _rows(csv_path)
    names = list(dict.fromkeys(r["candidate"] for r in rows))
    lines = ["| b | busy loops | " + " | ".join(f"`{n}`" for n in names) + " |", "|---:|---:|" + "---|" * len(names)]
    for b, busy in sorted({(int(r["b"]), int(r["busy_loops"])) for r in rows}):
        cells = []
        for n in names:
            r = next(x for x in rows if x["candidate"] == n and int(x["b"]) == b and int(x["busy_loops"]) == busy)
            cells.append(f"{float(r['agent_ticks_per_s']):.3g} ({float(r['vs_serial']):.2f}x)")
        lines.append(f"| {b} | {busy} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


@renders("policy_speed", "policy_speed_cpu.csv")
def policy_speed_table(csv_path: Path) -> str:
    """Policy inference against pymdp's jitted ``infer_policies`` per case, and the node's tick without / with it
    (``benchmarks/policy_speed.py``)."""
    rows = _rows(csv_path)
    by_case: dict[str, dict[str, dict]] = {}
    for r in rows:
        by_case.setdefault(r["case"], {})[r["candidate"]] = r
    speedups = sorted(float(c["fused_numba"]["speedup"]) for c in by_case.values())
    loads = [float(r["load"]) for r in rows]
    lines = [f"{len(by_case)} cases, float32, one agent, median over rounds (us); fused_numba over pymdp: median "
             f"{float(np.median(speedups)):.1f}x, worst {speedups[0]:.1f}x; load {min(loads):.2f}-{max(loads):.2f}:",
             "", "| case | policies | pymdp | fused_numba | speedup | jax | speedup |", "|---|---:|---:|---:|---:|---:|---:|"]
    for case, c in by_case.items():
        pm, nb, jx = c["pymdp"], c["fused_numba"], c["jax"]
        lines.append(f"| {case} | {pm['num_policies']} | {float(pm['median_us']):.1f} | {float(nb['median_us']):.1f} | "
                     f"{float(nb['speedup']):.1f}x | {float(jx['median_us']):.1f} | {float(jx['speedup']):.2f}x |")
    ticks = [(case, c) for case, c in by_case.items() if "tick" in c]
    if ticks:
        lines += ["", "| the node's tick (default model) | without policy inference | with | ratio |", "|---|---:|---:|---:|"]
        for case, c in ticks:
            plain, policy = float(c["tick"]["median_us"]), float(c["tick+policy"]["median_us"])
            lines.append(f"| {case} | {plain:.1f} | {policy:.1f} | {policy / plain:.2f}x |")
    return "\n".join(lines) + "\n"


@renders("bench_check", "bench_check_cpu.json")
def bench_check_table(baselines_json: Path) -> str:
    """The speed gate's committed baselines (``python -m lab bench-check --update``): how each group was measured,
    then each ratio and its ceiling."""
    record = json.loads(Path(baselines_json).read_text())
    slack = float(record["slack"])
    groups = measured_groups(record)
    lines = ["| group | measured by | load at the start | runs (median) |", "|---|---|---:|---:|"]
    lines += [f"| {g} | `{m['command']}` | {m['load']} | {m['runs']} |" for g, m in groups.items()]
    lines += ["", f"A ratio fails above its baseline x {slack:g}:", "", "| ratio | group | baseline | fails above |",
              "|---|---|---:|---:|"]
    for name, value in record["ratios"].items():
        lines.append(f"| `{name}` | {group_of(name)} | {float(value):.3f} | {float(value) * slack:.3f} |")
    return "\n".join(lines) + "\n"


def render(name: str, bench_dir: Path) -> str:
    """The markdown of table ``name`` (a key of ``TABLES``) from the files in ``bench_dir``."""
    if name not in TABLES:
        raise ValueError(f"table: unknown {name!r}; expected one of {sorted(TABLES)}")
    return TABLES[name](Path(bench_dir))


def update(text: str, bench_dir: Path) -> str:
    """``text`` with every marked table re-rendered."""
    return BLOCK.sub(lambda m: m.group(1) + render(m.group("name"), bench_dir) + m.group(4), text)


def blocks(text: str) -> dict[str, str]:
    """{table name: its committed body} of every marked block in ``text``."""
    return {m.group("name"): m.group("body") for m in BLOCK.finditer(text)}


def stale(path: Path, bench_dir: Path) -> list[str]:
    """The tables of the markdown file ``path`` whose text is not what ``bench_dir``'s files give."""
    return [name for name, body in blocks(Path(path).read_text()).items() if body != render(name, bench_dir)]


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab readme-tables", description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 when a table is out of date")
    args = p.parse_args(argv)
    bench_dir = ROOT / "benchmarks"
    out_of_date = 0
    for path in FILES:
        names = stale(path, bench_dir)
        out_of_date += len(names)
        if names:
            print(f"{path.relative_to(ROOT)}: {'out of date' if args.check else 'rewritten'}: {', '.join(names)}")
            if not args.check:
                path.write_text(update(path.read_text(), bench_dir))
    return 1 if args.check and out_of_date else 0
