"""The paper's scale in one run (``python -m lab scale``): compiles, timings and reports inside one wall-clock budget.

The M = 25 and M = 125 configurations above 1e5 parameters (one per (F, M, regime) stratum), pymdp, the best merged
variants, fused_cuda and ``auto`` (the node's device and variant decision) on the default device, fused_numba on the
host CPU, timed round-robin per (configuration, algorithm). Four phases share one deadline (``--minutes``):

1. **select**: ``--per-stratum`` configurations of each stratum with M in ``--modalities`` and at least
   ``--min-total-a`` A elements (``bench``'s selection, seeded), the largest strata interleaved; their arrays are
   built here, once.
2. **compile** (``--compile-seconds``): every (configuration, algorithm, candidate)'s first call, one process per
   (configuration, algorithm) and pass (``compile-times --in-process``, ``--jobs`` at once; ``compile_passes``: the
   headline's candidates for every group first, then the others), into JAX's persistent compilation cache (numba
   caches its kernels in its own folder). Their
   rows (``compile_<tag>.csv``) are the device's first-call times, measured side by side. At the deadline every one
   of these processes still running is killed with its process group; the rows it wrote stay.
3. **time**: ``bench`` in one process: a candidate whose first call did not finish in phase 2 gets a row
   ``skipped_compile`` that says so (a refusal or an error there: that row; a call too slow to time within the case
   limit, as fused_cuda in the CUDA simulator on a large model: ``skipped_time``), instead of compiling here; the
   others load their programs from the cache. No (configuration, algorithm) group starts after the time kept for phase 4.
4. **report**: ``report`` (``summary_<tag>.md``, ``violin_<tag>.png``, ``params_vs_latency_<tag>.png``) and the
   crossover table (``crossover_<tag>.md``), from ``sweep_<tag>.csv``; ``run_<tag>.txt`` holds each phase's wall time.

numba-cuda 0.30.4 calls ``numpy.row_stack``, which numpy 2.5 removed: where numpy lacks it, every process this run
starts gets ``lab/numpy_compat`` on its ``PYTHONPATH`` (a ``sitecustomize`` that sets ``numpy.row_stack =
numpy.vstack``), and this process sets it too.

    python -m lab scale --out-dir benchmarks --tag scale_nvidia_h200        # on the GPU host: about 8 minutes
    JAX_PLATFORMS=cpu NUMBA_ENABLE_CUDASIM=1 python -m lab scale --tag scale_rehearsal_cpu --ids c0690 c0771 \
        c0459 --algorithms fpi mmp --minutes 50 --compile-seconds 1800 --compile-case-limit 400 --jobs 2  # a CPU rehearsal
"""
from __future__ import annotations

import argparse
import csv
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from lab import compile_times, crossover, harness, report
from lab.generator import DEFAULT_CACHE, ConfigSpec, generate_specs, load_or_build, read_index, write_index

ROOT = Path(__file__).resolve().parents[1]
COMPAT = Path(__file__).resolve().parent / "numpy_compat"
#: The candidates beside pymdp: the merged JAX variants that were fastest at this scale on a CPU or a GPU, the CUDA
#: kernel, the host CPU's kernel and the node's decision, in phase 2's compile order (``compile_passes``).
DEFAULT_VARIANTS = ("fused_numba", "clustered_hybrid_block", "fused_pairwise", "hybrid_block",
                    "clustered_end_to_end", "fused_cuda", "auto")
#: Phase 2's first pass, over every group before any second pass: what the crossover table's headline needs (the
#: host CPU's kernel, the merged variant fastest on most of the H200's rows, pymdp). On the H200 one process per
#: group took 60-180 s for its candidates (pymdp alone 15-117 s), so 16 of them reached 24 of 33 groups.
FIRST_PASS = ("fused_numba", "clustered_hybrid_block", harness.PYMDP)
DEFAULT_MODALITIES = (25, 125)
DEFAULT_MIN_TOTAL_A = 100_000
DEFAULT_MINUTES = 8.0
DEFAULT_COMPILE_SECONDS = 210.0
DEFAULT_COMPILE_CASE_LIMIT = 150.0
REPORT_SECONDS = 45.0  # kept for phase 4
MIN_GROUP_SECONDS = 4.0  # below this per (configuration, algorithm) the timed phase would not finish
SKIPPED = "skipped_compile"
#: A case of the timed phase makes at least this many calls (first, warm-up, the round-robin's minimum rounds): a
#: candidate whose one call takes over its case limit over this is skipped (``skipped_time``).
CALLS_PER_CASE = 10


@dataclass
class Budget:
    """The run's deadline (``time.monotonic()`` seconds) and what each phase took."""

    start: float
    seconds: float
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def deadline(self) -> float:
        return self.start + self.seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def done(self, phase: str, since: float) -> None:
        self.phases[phase] = time.monotonic() - since


def numpy_compat_env(env: dict) -> dict:
    """``env`` with ``lab/numpy_compat`` first on PYTHONPATH where this numpy lacks ``row_stack`` (numpy >= 2.5)."""
    out = dict(env)
    if not hasattr(np, "row_stack"):
        out["PYTHONPATH"] = os.pathsep.join([str(COMPAT), str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    else:
        out["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    return out


def select(cache: Path, ids: Optional[Sequence[str]], modalities: Sequence[int], min_total_a: int,
           per_stratum: int, seed: int = 0) -> list[ConfigSpec]:
    """The configurations (``ids`` in that order, else ``per_stratum`` per stratum with M in ``modalities`` and at
    least ``min_total_a`` A elements); their arrays are built into ``cache`` here."""
    try:
        specs = read_index(cache)
    except FileNotFoundError:
        specs = generate_specs()
        write_index(specs, cache, {})
    chosen = harness.select_configs(argparse.Namespace(
        ids=ids, max_total_a=None, min_total_a=None if ids else min_total_a, modalities=None if ids else modalities,
        max_fm=None, exclude=None, per_stratum=None if ids else per_stratum, subset_seed=seed, limit=None, shard=None),
        specs)
    for spec in chosen:
        load_or_build(spec, cache)
    return chosen


def compile_phase(specs: Sequence[ConfigSpec], algorithms: Sequence[str], variants: Sequence[str], cache: Path,
                  folder: Path, jobs: int, deadline: float, env: dict, horizon: int, num_iter: int,
                  case_limit: float) -> list[dict]:
    """Every candidate's first call: one process per (configuration, algorithm) and pass of ``compile_passes`` (the
    first pass of every group before any second pass), ``jobs`` at once, each measuring its candidates in order and
    writing a row as each one finishes (a candidate over ``case_limit`` seconds: a ``timeout`` row); the processes
    still running at ``deadline`` are killed with their process groups. Returns the rows written
    (``compile_times.COLUMNS``)."""
    folder.mkdir(parents=True, exist_ok=True)
    queue = [(spec, alg, k, order) for k, order in enumerate(compile_passes(variants)) if order
             for spec in specs for alg in algorithms]
    running: list[subprocess.Popen] = []
    outs = []
    try:
        while (queue or running) and time.monotonic() < deadline:
            while queue and len(running) < jobs:
                spec, alg, k, order = queue.pop(0)
                out = folder / f"{spec.config_id}_{alg}_{k}.csv"
                outs.append(out)
                cmd = [sys.executable, "-m", "lab", "compile-times", "--in-process", "--no-pymdp", "--no-hlo", "--quiet",
                       "--cache", str(cache), "--ids", spec.config_id, "--algorithms", alg, "--variants", *order,
                       "--horizon", str(horizon), "--num-iter", str(num_iter), "--case-time-limit", str(case_limit),
                       "--out", str(out)]
                with (folder / f"{out.stem}.log").open("w") as log:
                    running.append(subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                                    start_new_session=True))
            time.sleep(0.2)
            running = [p for p in running if p.poll() is None]
    finally:
        for proc in running:  # the processes (and their children) this phase started and that still run
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    rows = []
    for out in outs:
        if out.is_file():
            with out.open(newline="") as fh:
                rows += list(csv.DictReader(fh))
    return rows


def compile_passes(variants: Sequence[str]) -> tuple[list[str], list[str]]:
    """Phase 2's two passes: ``FIRST_PASS``'s candidates among ``variants`` and pymdp, then the others in the order
    given, auto last (its verify step compiles several programs, from the cache where the passes left them)."""
    first = [v for v in FIRST_PASS if v == harness.PYMDP or v in variants]
    rest = [v for v in variants if v not in first and v != "auto"]
    return first, rest + (["auto"] if "auto" in variants else [])


def skips(specs: Sequence[ConfigSpec], algorithms: Sequence[str], variants: Sequence[str], rows: Sequence[dict],
          compile_seconds: float, call_limit: float) -> dict[tuple[str, str, str], tuple[str, str]]:
    """(config, algorithm, candidate) -> (status, reason) for every candidate phase 3 must not build: its first call
    did not finish in phase 2 (``skipped_compile``), one call after it took over ``call_limit`` seconds
    (``skipped_time``: the round-robin could not time it in its case limit), or phase 2 recorded a refusal or an
    error."""
    got = {(r["config_id"], r["algorithm"], r["variant"]): r for r in rows}
    out = {}
    for spec in specs:
        for alg in algorithms:
            for v in [harness.PYMDP] + list(variants):
                r = got.get((spec.config_id, alg, v))
                if r is None:
                    out[spec.config_id, alg, v] = (SKIPPED, f"its first call (compile) did not finish within the "
                                                            f"{compile_seconds:.0f} s compile phase")
                elif r["status"] != "ok":
                    out[spec.config_id, alg, v] = (r["status"], f"compile phase: {r['reason']}")
                elif float(r.get("second_call_s") or 0.0) > call_limit:
                    out[spec.config_id, alg, v] = ("skipped_time", f"one call took {float(r['second_call_s']):.1f} s "
                                                                   f"in the compile phase, over {call_limit:.1f} s")
    return out


def run(args) -> Budget:
    budget = Budget(time.monotonic(), 60.0 * args.minutes)
    out_dir, tag = args.out_dir, args.tag
    out_dir.mkdir(parents=True, exist_ok=True)
    env = numpy_compat_env(dict(os.environ))
    env.setdefault("JAX_COMPILATION_CACHE_DIR", str(Path(args.work_dir) / "jax_cache"))
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
    os.environ.update({k: env[k] for k in ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
                                           "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "PYTHONPATH")})
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack  # this process too (numba-cuda's import, numpy >= 2.5)

    t = time.monotonic()
    specs = select(args.cache, args.ids, args.modalities, args.min_total_a, args.per_stratum)
    budget.done("select", t)
    print(f"select: {len(specs)} configurations ({' '.join(s.config_id for s in specs)}), "
          f"{len(specs) * len(args.algorithms)} groups, {time.monotonic() - t:.0f} s", flush=True)

    t = time.monotonic()
    compile_deadline = min(t + args.compile_seconds, budget.deadline - REPORT_SECONDS)
    work = Path(args.work_dir) / "compile"
    rows = compile_phase(specs, args.algorithms, args.variants, args.cache, work, args.jobs, compile_deadline, env,
                         args.horizon, args.num_iter, args.compile_case_limit)
    compile_times_csv = out_dir / f"compile_{tag}.csv"
    with compile_times_csv.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=compile_times.COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    budget.done("compile", t)
    expected = len(specs) * len(args.algorithms) * (1 + len(args.variants))
    print(f"compile: {len(rows)} of {expected} first calls finished in {time.monotonic() - t:.0f} s "
          f"({sum(r['status'] == 'ok' for r in rows)} ok) -> {compile_times_csv}", flush=True)

    t = time.monotonic()
    sweep = out_dir / f"sweep_{tag}.csv"
    if sweep.is_file():
        sweep.unlink()  # one run, one CSV: this run's rows only
    groups = len(specs) * len(args.algorithms)
    left = budget.left() - REPORT_SECONDS
    max_time = float(np.clip(0.35 * left / max(groups, 1), 0.2, 2.0))
    if left / max(groups, 1) < MIN_GROUP_SECONDS:
        print(f"time: {left:.0f} s left for {groups} groups; the last ones will not start", flush=True)
    settings = harness.Settings(cache=str(args.cache), rounds=args.rounds, max_time_s=max_time, packed=False)
    limits = harness.SweepLimits(case_time_limit=args.case_time_limit, max_minutes=max(left, 0.0) / 60.0)
    counts = harness.run_sweep(specs, sweep, args.algorithms, list(args.variants), args.horizon, args.num_iter,
                               settings, limits, progress=False,
                               skip=skips(specs, args.algorithms, args.variants, rows, args.compile_seconds,
                                          args.case_time_limit / CALLS_PER_CASE))
    budget.done("time", t)
    print(f"time: {counts} in {time.monotonic() - t:.0f} s (round-robin at most {max_time:.2f} s per group) -> "
          f"{sweep}", flush=True)

    t = time.monotonic()
    report.run_report([sweep], out_dir, tag, plots=not args.no_plots)
    with sweep.open(newline="") as fh:
        (out_dir / f"crossover_{tag}.md").write_text(crossover.render(list(csv.DictReader(fh))))
    budget.done("report", t)
    total = time.monotonic() - budget.start
    lines = [f"python -m lab scale {' '.join(args.argv)}", f"configurations: {' '.join(s.config_id for s in specs)}",
             f"load average at the end: {os.getloadavg()}"]
    lines += [f"{phase}: {seconds:.1f} s" for phase, seconds in budget.phases.items()]
    lines.append(f"total: {total:.1f} s of a {args.minutes * 60:.0f} s budget")
    (out_dir / f"run_{tag}.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[2:]), flush=True)
    return budget


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="python -m lab scale", description=__doc__.split("\n")[0])
    p.add_argument("--out-dir", type=Path, default=Path("benchmarks"), help="where the CSVs, tables and plots go")
    p.add_argument("--tag", default="scale", help="suffix of the output files (e.g. scale_nvidia_h200)")
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="generator cache folder")
    p.add_argument("--work-dir", type=Path, default=Path("/tmp/bayes_scale"),
                   help="the compile phase's logs and CSVs, and JAX's cache unless JAX_COMPILATION_CACHE_DIR is set")
    p.add_argument("--ids", nargs="+", help="these configurations instead of the selection")
    p.add_argument("--modalities", type=int, nargs="+", default=list(DEFAULT_MODALITIES))
    p.add_argument("--min-total-a", type=int, default=DEFAULT_MIN_TOTAL_A)
    p.add_argument("--per-stratum", type=int, default=1)
    p.add_argument("--algorithms", nargs="+", default=list(harness.DEFAULT_ALGORITHMS),
                   choices=harness.DEFAULT_ALGORITHMS)
    p.add_argument("--variants", nargs="+", default=list(DEFAULT_VARIANTS),
                   help="candidates beside pymdp, in compile order (default: %(default)s)")
    p.add_argument("--minutes", type=float, default=DEFAULT_MINUTES, help="the whole run's wall-clock budget")
    p.add_argument("--compile-seconds", type=float, default=DEFAULT_COMPILE_SECONDS, help="phase 2's budget")
    p.add_argument("--compile-case-limit", type=float, default=DEFAULT_COMPILE_CASE_LIMIT,
                   help="phase 2: seconds one candidate's first call may take before it is stopped (a timeout row)")
    p.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2)), help="phase 2's processes at once")
    p.add_argument("--rounds", type=int, default=30, help="round-robin rounds per group (at most)")
    p.add_argument("--case-time-limit", type=float, default=60.0, help="phase 3: seconds per case before it is killed")
    p.add_argument("--horizon", type=int, default=harness.DEFAULT_HORIZON)
    p.add_argument("--num-iter", type=int, default=harness.DEFAULT_NUM_ITER)
    p.add_argument("--no-plots", action="store_true")
    args = p.parse_args(argv)
    args.argv = argv
    run(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
