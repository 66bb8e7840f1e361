"""Every variant vs pymdp on a dozen models, small to large (``python -m lab bench-variants``, ``make bench``).

A thin configuration of the harness: the twelve models are picked from the generator's configurations by
total A size, geometrically spaced (about 60 to 1.2e6 elements), with at most 10 factors and 10 modalities
so that one run (12 models x 3 algorithms x 11 implementations x 2 APIs = ~800 XLA compilations) fits in
about 20 minutes on a 2-core CPU: XLA's compile time grows with the number of modalities (about 3 s per
program at M = 10, 10-13 s at M = 25 and 15-60 s at M = 125 on this machine). ``--max-fm`` widens it. Every variant in ``VARIANTS`` and pymdp 1.0.4 run in the same
process, list and packed APIs, compile time apart from the steady-state median. Writes a CSV (resumable, like
every harness CSV) and prints the speedup table (median and worst ratio per variant and algorithm, for the
list call and for the packed call) and the parameter counts of the merged variants relative to their dense
padded forms.
"""
from __future__ import annotations

import argparse
import math
import re
import time
from pathlib import Path
from typing import Optional, Sequence

import jax
import numpy as np

from lab import harness, report
from lab.generator import ConfigSpec, generate_specs, read_index

DEFAULT_MODELS = 12
SIZE_RANGE = (60.0, 1.2e6)
MAX_FM = 10


def dozen_models(specs: Sequence[ConfigSpec], n: int = DEFAULT_MODELS, size_range=SIZE_RANGE,
                 max_fm: int = MAX_FM) -> list[ConfigSpec]:
    """``n`` configurations whose total A sizes are closest to ``n`` geometrically spaced targets."""
    pool = [s for s in specs if s.F <= max_fm and s.M <= max_fm]
    sizes = np.log(np.array([sum(s.a_elements()) for s in pool], dtype=float))
    chosen: list[ConfigSpec] = []
    used: set[int] = set()
    for target in np.geomspace(size_range[0], size_range[1], n):
        for i in np.argsort(np.abs(sizes - math.log(target)), kind="stable"):
            if int(i) not in used:
                used.add(int(i))
                chosen.append(pool[int(i)])
                break
    return chosen


def device_tag() -> str:
    dev = jax.devices()[0]
    if jax.default_backend() == "cpu":
        return "cpu"
    kind = getattr(dev, "device_kind", "gpu").lower()
    return re.sub(r"[^a-z0-9]+", "_", kind).strip("_") or jax.default_backend()


def speedup_table(rows: Sequence[dict]) -> str:
    """Median and worst (min) ratio pymdp / variant per algorithm and variant, list and packed calls."""
    out = {}
    for metric in ("median_s", "packed_median_s"):
        lat, _, status = report.latency_tables(rows, metric)
        out[metric] = (report.summary_rows(report.ratios(lat, {}), status))
    lines = ["| algorithm | variant | configs | skipped | list: median | list: worst | packed: median | packed: worst |",
             "|---|---|---|---|---|---|---|---|"]
    packed = {(r["algorithm"], r["variant"]): r for r in out["packed_median_s"]}
    fmt = lambda x: "-" if not math.isfinite(x) else f"{x:.2f}"  # noqa: E731
    for r in out["median_s"]:
        p = packed.get((r["algorithm"], r["variant"]), {})
        lines.append(f"| {r['algorithm']} | {r['variant']} | {r['configs']} | {r['skipped']} | "
                     f"{fmt(r['median_ratio'])} | {fmt(r['min_ratio'])} | "
                     f"{fmt(p.get('median_ratio', float('nan')))} | {fmt(p.get('min_ratio', float('nan')))} |")
    return "\n".join(lines) + "\n"


def parameter_table(rows: Sequence[dict]) -> str:
    """Median over models of stored elements: dense padded / sparse (BCOO) and dense padded / clustered."""
    counts: dict[tuple[str, str], float] = {}
    for r in rows:
        if r["variant"] == harness.PYMDP or r["algorithm"] != "fpi":
            continue
        try:
            counts[(r["config_id"], r["variant"])] = float(r["param_count"])
        except (TypeError, ValueError):
            continue
    lines = ["| family | padded / BCOO (median) | padded / clustered (median) | models |", "|---|---|---|---|"]
    for fam in ("hybrid", "hybrid_block", "end_to_end"):
        sp, cl = [], []
        for cfg in {c for c, _ in counts}:
            dense = counts.get((cfg, fam))
            if dense is None:
                continue
            if (cfg, f"sparse_{fam}") in counts:
                sp.append(dense / counts[(cfg, f"sparse_{fam}")])
            if (cfg, f"clustered_{fam}") in counts:
                cl.append(dense / counts[(cfg, f"clustered_{fam}")])
        f = lambda xs: f"{np.median(xs):.1f}x" if xs else "-"  # noqa: E731
        lines.append(f"| {fam} | {f(sp)} | {f(cl)} | {max(len(sp), len(cl))} |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab bench-variants", description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, help="CSV (default benchmarks/variants_<device>.csv)")
    p.add_argument("--models", type=int, default=DEFAULT_MODELS)
    p.add_argument("--ids", nargs="+", help="use these config ids instead of the dozen")
    p.add_argument("--max-fm", type=int, default=MAX_FM, help="largest F and M among the dozen")
    harness.add_common_arguments(p)
    p.add_argument("--shard", help="i/n: time only every n-th of the models (merge the CSVs with bench --merge)")
    p.add_argument("--table-only", action="store_true", help="print the tables of an existing CSV")
    args = p.parse_args(argv)

    out = args.out or Path(f"benchmarks/variants_{device_tag()}.csv")
    try:
        specs = read_index(args.cache)
    except FileNotFoundError:
        specs = generate_specs()
    chosen = [s for s in specs if s.config_id in set(args.ids)] if args.ids else dozen_models(specs, args.models, max_fm=args.max_fm)
    run = harness.shard(chosen, args.shard)
    if not args.table_only:
        print("models: " + ", ".join(f"{s.config_id} (F={s.F}, M={s.M}, |A|={sum(s.a_elements())})" for s in run))
        t0 = time.time()
        counts = harness.run_sweep(run, out, args.algorithms, args.variants, args.horizon, args.num_iter,
                                   harness.settings_from_args(args), harness.limits_from_args(args),
                                   args.retry_failed, progress=not args.no_progress)
        print(f"{time.time() - t0:.0f} s: {counts} -> {out}")
    ids = {s.config_id for s in chosen}
    rows = [r for r in harness.read_rows([out]) if r["config_id"] in ids]
    print("\nSpeedup over pymdp 1.0.4 (pymdp latency / variant latency; > 1 is faster)\n")
    print(speedup_table(rows))
    print("Stored elements of the prepared likelihood arrays (fpi rows)\n")
    print(parameter_table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
