"""First-call (compile) times of pymdp and of every JAX variant (``python -m lab compile-times``).

Each (configuration, algorithm, candidate) runs in a fresh process (spawned; JAX's persistent compilation cache
off), so its first call compiles. A child first compiles a trivial program (XLA's one-time start-up stays out of
the figure), then builds the candidate and makes its first list call on the harness's inputs:

- ``build_s``: the build (validation, log-tensors, merging, device copies; pymdp: its ``jax.jit`` wrapper);
- ``first_call_s``: the first call, trace + lower + XLA compile + one run: what a node pays at its first
  configure without a warm cache; ``first_call_cpu_s``: the CPU time the process spent in it (every thread),
  which a loaded machine inflates far less than the wall time; ``second_call_s``: the call after it (one run);
- ``lower_s`` / ``compile_s`` (``compile_cpu_s``): the same program traced and lowered, then compiled by XLA, timed
  apart (a second compile after JAX's caches are cleared; ``--no-hlo`` skips it);
- ``stablehlo_ops``: operations of the lowered program (what the variant's Python emits: it grows when a
  variant unrolls per modality), ``hlo_ops``: instructions of XLA's optimised HLO (every computation, fused
  bodies included, parameters, constants and tuples left out).

Every row records the machine, the 1-minute load average before and after the case, jax/jaxlib and the backend.
A case over ``--case-time-limit`` is killed and recorded as ``timeout``; a variant that refuses the model
(``VariantUnsupported``) as ``unsupported``. Rows are appended as each case ends; a rerun skips cases already in
the CSV (``--fresh`` starts over).

    python -m lab compile-times --out benchmarks/compile_times_cpu.csv
"""
from __future__ import annotations

import argparse
import csv
import multiprocessing as mp
import os
import re
import signal
import time
import traceback
from pathlib import Path
from typing import Any, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from bayes_infer_ros.autotune.timing import block, environment
from bayes_infer_ros.inference import build_inference, parameter_counts
from bayes_infer_ros.inference.registry import VARIANT_OPS
from lab.generator import DEFAULT_CACHE, ConfigSpec, generate_specs, load_or_build, read_index
from lab.harness import AUTO, Case, auto_engine, make_inputs, pymdp_callable, restored_environment

PYMDP = "pymdp"
#: Two configurations of the paper's generator at M = 25 and three at M = 125, each above 1e5 parameters:
#: F = 25, M = 125 (c0771, the issue's), F = 10, M = 125 (c0571), F = 125, M = 125 (c0863), F = 25, M = 25
#: (c0690, the issue's) and F = 10, M = 25 (c0510).
DEFAULT_IDS = ("c0771", "c0571", "c0863", "c0690", "c0510")
DEFAULT_ALGORITHMS = ("fpi", "vmp", "mmp")
DEFAULT_CASE_TIME_LIMIT = 300.0
COLUMNS = [
    "config_id", "stratum", "F", "M", "a_elements", "algorithm", "variant", "status", "reason", "build_s",
    "first_call_s", "first_call_cpu_s", "second_call_s", "lower_s", "compile_s", "compile_cpu_s", "stablehlo_ops",
    "hlo_ops", "param_count", "isolation", "loadavg_before", "loadavg_after", "machine", "cpu_count", "jax", "jaxlib",
    "backend", "device", "dtype", "timestamp",
]
KEY = ("config_id", "algorithm", "variant", "backend", "dtype")
# XLA instructions that compute nothing (left out of ``hlo_ops``)
_FREE = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all", "partition-id", "replica-id",
         "opt-barrier"}
_HLO_OP = re.compile(r"^\s*(?:ROOT\s+)?%?\S+\s*=\s*(?:\S+\s+)*?([a-z][a-z0-9\-]*)\(")
_STABLEHLO_OP = re.compile(r"^\s*(?:%\S+(?:,\s*%\S+)*\s*=\s*)?\"?([a-z_]+\.[a-z_\.]+)")


def default_jax_variants() -> list[str]:
    """Every JAX variant of the registry (the native engines have no XLA program)."""
    return list(VARIANT_OPS)


def hlo_op_count(text: str) -> int:
    """Instructions of an optimised HLO module (every computation), parameters, constants and tuples left out."""
    count = 0
    for line in text.splitlines():
        m = _HLO_OP.match(line)
        if m and m.group(1) not in _FREE:
            count += 1
    return count


def stablehlo_op_count(text: str) -> int:
    """Operations of a lowered (StableHLO) module, ``func.return``, constants and the module's structure left out."""
    count = 0
    for line in text.splitlines():
        m = _STABLEHLO_OP.match(line)
        if m and m.group(1) not in ("stablehlo.constant", "func.return", "stablehlo.return", "func.func"):
            count += 1
    return count


def _loadavg() -> float:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return float("nan")


def _time_two_calls(row: dict[str, Any], call: Any) -> None:
    """The first call (wall and CPU time: trace, compile, one run) and the second (one run) into ``row``."""
    t0, c0 = time.perf_counter(), time.process_time()
    block(call())
    row["first_call_s"], row["first_call_cpu_s"] = time.perf_counter() - t0, time.process_time() - c0
    t0 = time.perf_counter()
    block(call())
    row["second_call_s"] = time.perf_counter() - t0


def measure_case(spec: ConfigSpec, cache: Optional[str], algorithm: str, variant: str, horizon: int, num_iter: int,
                 dtype: str, hlo: bool) -> dict:
    """One candidate's build and first call, in THIS process (a fresh one: see ``run_case``)."""
    if dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    block(jax.jit(lambda x: x * 2.0 + 1.0)(jnp.ones(3)))  # XLA's start-up, apart from the figure
    model = load_or_build(spec, Path(cache) if cache else None, dtype=np.dtype(dtype))
    T = 1 if algorithm == "fpi" else horizon
    inp = make_inputs(spec, model, algorithm, T, np.dtype(dtype))
    obs = [jnp.asarray(o) for o in inp["obs"]]
    prior = [jnp.asarray(p) for p in inp["prior"]]
    actions = None if inp["actions"] is None else jnp.asarray(inp["actions"])
    row: dict[str, Any] = {}
    t0 = time.perf_counter()
    if variant == PYMDP:
        fn = pymdp_callable(algorithm, spec.A_dependencies, model.B_dependencies, num_iter, 1.0)
        A = [jnp.asarray(a) for a in model.A]
        B = [jnp.asarray(b) for b in model.B]
        args = (A, obs, prior) if algorithm == "fpi" else (A, B, obs, prior, actions)
        row["param_count"] = sum(spec.a_elements())
        row["build_s"] = time.perf_counter() - t0
        _time_two_calls(row, lambda: fn(*args))
        lower = lambda: fn.lower(*args)  # noqa: E731
    else:
        if variant == AUTO:  # the node's decision: its verify step builds and times its candidates
            engine, chosen, row["reason"] = auto_engine(Case(spec, algorithm, AUTO, T, num_iter), model, 1.0)
        else:
            engine, chosen = build_inference(algorithm, model.A, model.A_dependencies, model.B, model.B_dependencies,
                                             variant=variant, num_iter=num_iter), variant
        row["build_s"] = time.perf_counter() - t0
        row["param_count"] = int(parameter_counts(model, variants=[chosen])[chosen])
        call = (obs, prior) if algorithm == "fpi" else (obs, prior, actions)
        _time_two_calls(row, lambda: engine(*call))
        lower = (lambda: engine.lower(*call)) if hasattr(engine, "lower") else None
    if hlo and lower is not None:
        jax.clear_caches()
        t0 = time.perf_counter()
        lowered = lower()
        row["lower_s"] = time.perf_counter() - t0
        row["stablehlo_ops"] = stablehlo_op_count(lowered.as_text())
        t0, c0 = time.perf_counter(), time.process_time()
        compiled = lowered.compile()
        row["compile_s"], row["compile_cpu_s"] = time.perf_counter() - t0, time.process_time() - c0
        row["hlo_ops"] = hlo_op_count(compiled.as_text())
    return row


def _child(conn, args: tuple) -> None:
    try:
        conn.send(("ok", measure_case(*args)))
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a recorded row
        status = "unsupported" if type(exc).__name__ == "VariantUnsupported" else "error"
        if status == "error":
            traceback.print_exc()
        conn.send((status, f"{type(exc).__name__}: {exc}".replace("\n", " ")[:300]))


def run_case(args: tuple, time_limit: float, persistent_cache: bool = False) -> dict:
    """``measure_case(*args)`` in a fresh spawned process, JAX's persistent compilation cache off (or as the
    environment sets it: ``persistent_cache``, to fill it); a row's measured part."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    with restored_environment(("JAX_ENABLE_COMPILATION_CACHE", "JAX_PLATFORMS")):
        if not persistent_cache:
            os.environ["JAX_ENABLE_COMPILATION_CACHE"] = "false"
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        proc = ctx.Process(target=_child, args=(child, args), daemon=True)
        proc.start()
    child.close()
    try:
        if not parent.poll(time_limit):
            return {"status": "timeout", "reason": f"over the {time_limit:.0f} s case limit"}
        status, payload = parent.recv()
    except (EOFError, ConnectionResetError):
        return {"status": "error", "reason": "the case's process died (killed by the OS, likely out of memory)"}
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(10)
    if status == "ok":
        return {"status": "ok", "reason": "", **payload}
    return {"status": status, "reason": payload}


class CaseTimeout(Exception):
    """A case ran past its time limit (in process: raised by the interval timer)."""


def run_in_process(args: tuple, time_limit: Optional[float] = None) -> dict:
    """``measure_case(*args)`` here; a row's measured part (the failure's status and reason when it fails).
    ``time_limit``: seconds before the case is stopped (SIGALRM; a compile in XLA ends first, Python code at once)."""
    def expire(signum, frame):
        raise CaseTimeout(f"over the {time_limit:.0f} s case limit")

    previous = signal.signal(signal.SIGALRM, expire) if time_limit else None
    if time_limit:
        signal.setitimer(signal.ITIMER_REAL, time_limit)
    try:
        return {"status": "ok", "reason": "", **measure_case(*args)}
    except CaseTimeout as exc:
        return {"status": "timeout", "reason": str(exc)}
    except Exception as exc:  # noqa: BLE001 - every failure becomes a recorded row
        status = "unsupported" if type(exc).__name__ == "VariantUnsupported" else "error"
        return {"status": status, "reason": f"{type(exc).__name__}: {exc}".replace("\n", " ")[:300]}
    finally:
        if time_limit:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


def _environment(dtype: str) -> dict:
    """The machine and the JAX build (JAX's default backend: its first use initialises it here, in the parent)."""
    env = environment(dtype)
    return {k: env.get(k, "") for k in ("machine", "cpu_count", "jax", "jaxlib", "backend", "device", "dtype")}


def _read_done(path: Path) -> set[tuple]:
    if not path.is_file():
        return set()
    with path.open(newline="") as fh:
        return {tuple(r.get(k, "") for k in KEY) for r in csv.DictReader(fh)}


def run(specs: Sequence[ConfigSpec], out: Path, algorithms: Sequence[str], variants: Sequence[str], cache: Optional[str],
        horizon: int = 5, num_iter: int = 16, dtype: str = "float32", hlo: bool = True,
        case_time_limit: float = DEFAULT_CASE_TIME_LIMIT, progress: bool = True,
        persistent_cache: bool = False, in_process: bool = False, pymdp: bool = True) -> dict[str, int]:
    """Every (configuration, algorithm, candidate) in its own process; rows appended to ``out``.
    ``persistent_cache``: leave JAX's persistent compilation cache as the environment sets it (fills it).
    ``in_process``: run the cases in this process instead (for a caller that starts a process per configuration and
    algorithm; the time limit stops Python code at once, a compile in XLA when it returns). ``pymdp``: measure pymdp first in each (configuration, algorithm)."""
    env = _environment(dtype)
    done = _read_done(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    new = not out.is_file() or out.stat().st_size == 0
    counts: dict[str, int] = {}
    with out.open("a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS, extrasaction="ignore")
        if new:
            writer.writeheader()
        for spec in specs:
            for algorithm in algorithms:
                for variant in dict.fromkeys(([PYMDP] if pymdp else []) + list(variants)):
                    key = (spec.config_id, algorithm, variant, env["backend"], dtype)
                    if key in done:
                        counts["resumed"] = counts.get("resumed", 0) + 1
                        continue
                    before = _loadavg()
                    args = (spec, cache, algorithm, variant, horizon, num_iter, dtype, hlo)
                    got = (run_in_process(args, case_time_limit) if in_process
                           else run_case(args, case_time_limit, persistent_cache))
                    row = {"config_id": spec.config_id, "stratum": spec.stratum, "F": spec.F, "M": spec.M,
                           "a_elements": sum(spec.a_elements()), "algorithm": algorithm, "variant": variant,
                           "isolation": ("in process" if in_process else "process")
                           + (", persistent cache" if persistent_cache or in_process else ""),
                           "loadavg_before": before, "loadavg_after": _loadavg(),
                           "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()), **env, **got}
                    for k in ("build_s", "first_call_s", "first_call_cpu_s", "second_call_s", "lower_s", "compile_s",
                              "compile_cpu_s"):
                        if isinstance(row.get(k), float):
                            row[k] = round(row[k], 4)
                    writer.writerow(row)
                    fh.flush()
                    counts[row["status"]] = counts.get(row["status"], 0) + 1
                    if progress:
                        print(f"{spec.config_id} {algorithm} {variant:24s} {row['status']:11s} "
                              f"first call {row.get('first_call_s', '-')} s, hlo ops {row.get('hlo_ops', '-')}, "
                              f"load {before}", flush=True)
    return counts


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab compile-times", description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=Path("benchmarks/compile_times_cpu.csv"), help="CSV (appended, resumed)")
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="generator cache folder")
    p.add_argument("--ids", nargs="+", default=list(DEFAULT_IDS), help="configuration ids (default: %(default)s)")
    p.add_argument("--algorithms", nargs="+", default=list(DEFAULT_ALGORITHMS), choices=DEFAULT_ALGORITHMS)
    p.add_argument("--variants", nargs="+", help="default: every JAX variant (pymdp always runs); a native engine "
                   "(fused_numba, fused_cuda) or auto (the node's decision, its verify step included) are measured too")
    p.add_argument("--horizon", type=int, default=5, help="window T for vmp/mmp")
    p.add_argument("--num-iter", type=int, default=16)
    p.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    p.add_argument("--case-time-limit", type=float, default=DEFAULT_CASE_TIME_LIMIT, help="seconds per case")
    p.add_argument("--no-hlo", action="store_true", help="skip the lowered/compiled program's op counts and split")
    p.add_argument("--fresh", action="store_true", help="start the CSV over instead of resuming it")
    p.add_argument("--persistent-cache", action="store_true",
                   help="leave JAX's persistent compilation cache on, as the environment sets it (to fill it)")
    p.add_argument("--in-process", action="store_true",
                   help="measure in this process (the caller starts one process per case); JAX's cache as set")
    p.add_argument("--no-pymdp", action="store_true", help="only the --variants (which may name pymdp)")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    try:
        by_id = {s.config_id: s for s in read_index(args.cache)}
    except FileNotFoundError:
        by_id = {s.config_id: s for s in generate_specs()}
    unknown = [i for i in args.ids if i not in by_id]
    if unknown:
        raise SystemExit(f"--ids: no such configuration {', '.join(unknown)}")
    if args.fresh and args.out.is_file():
        args.out.unlink()
    t0 = time.time()
    counts = run([by_id[i] for i in args.ids], args.out, args.algorithms, args.variants or default_jax_variants(),
                 str(args.cache), args.horizon, args.num_iter, args.dtype, not args.no_hlo, args.case_time_limit,
                 progress=not args.quiet, persistent_cache=args.persistent_cache, in_process=args.in_process,
                 pymdp=not args.no_pymdp)
    print(f"{len(args.ids)} configurations, {time.time() - t0:.0f} s: {counts} -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
