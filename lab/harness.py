"""The benchmark harness (``python -m lab bench``): configuration x algorithm x variant, pymdp in the same run.

The cases of one (configuration, algorithm) are a group: pymdp and every variant are built in one worker,
then timed round-robin against each other (``autotune.timing.time_round_robin``: interleaved short rounds, so
load drift hits all alike). Each row records the build time, the first call (compile), the ranking statistic
``time_s`` (a low percentile of the per-call time over rounds) with the median and p90 beside it, the same for
the packed API (what the node calls), XLA:CPU's execution mode of the program, the parameter count, the largest
absolute difference from pymdp's result, and the environment (machine, jax/jaxlib, backend, device, dtype,
1-minute load average) on every row.

Built for long sweeps:
- rows are appended to the CSV as each case finishes, and a rerun skips every case already in it (resume);
- groups run in a worker process; a group over ``--case-time-limit`` per case kills the worker (its cases are
  recorded as ``timeout``) and a fresh worker takes the next group; a worker that dies (out of memory) is
  recorded as ``error``;
- a variant whose prepared arrays would not fit ``--memory-budget-gb`` (estimated from the structure alone,
  before anything is built) is recorded as ``skipped_memory``; a variant that refuses the model at build
  (``VariantUnsupported``) is recorded as ``unsupported``;
- ``--shard i/n`` (0 <= i < n) takes every n-th configuration, so machines can split a sweep and their CSVs
  merge (``--merge OUT IN...``, or pass several CSVs to ``report`` / ``autotune-train``);
- a tqdm progress bar with ETA.

The pymdp baseline is pymdp 1.0.4's ``algos.run_factorized_fpi`` / ``run_vmp`` / ``run_mmp`` under
``jax.jit`` with the dependency lists static, A (and B) passed as arguments as pymdp's ``Agent`` does; for
vmp/mmp B is selected by the actions inside the jitted call with
``pymdp.inference._condition_transitions_on_actions``.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import importlib
import multiprocessing as mp
import os
import random
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from tqdm import tqdm

from bayes_infer_ros.autotune import EngineConfig, decide
from bayes_infer_ros.autotune.select import MemoryBudget, peak_elements, size_estimates
from bayes_infer_ros.autotune.timing import CandidateTiming, block, environment, loadavg, time_round_robin
from bayes_infer_ros.inference import ALGORITHMS, VARIANTS, build_inference, parameter_counts
from lab.generator import DEFAULT_CACHE, ConfigSpec, generate_specs, load_or_build, read_index
from lab.xla_mode import LOG_ENV, capture_modes, program_label

PYMDP = "pymdp"
#: The node's ``variant: auto`` / ``device: auto`` decision (``autotune.decide``, verify step on) as a case: it is built
#: and timed beside every variant, and its row's ``reason`` says what it chose (``chose fused_cuda@gpu``).
AUTO = "auto"
AUTO_VERIFY_TOP_K = 3
DEFAULT_ALGORITHMS = ALGORITHMS
DEFAULT_HORIZON = 5
DEFAULT_NUM_ITER = 16
DEFAULT_MEMORY_BUDGET_GB = 2.0
DEFAULT_CASE_TIME_LIMIT = 120.0

COLUMNS = [
    "config_id", "stratum", "F", "M", "algorithm", "variant", "horizon", "num_iter", "status", "reason",
    "build_s", "compile_s", "first_call_s", "time_s", "median_s", "p10_s", "p90_s", "repeats", "core_median_s",
    "packed_compile_s", "packed_median_s", "packed_p10_s", "packed_p90_s", "packed_repeats",
    "param_count", "param_count_source", "est_peak_elements", "max_abs_diff_vs_pymdp", "exec_mode", "timing",
    "machine", "cpu", "cpu_count", "python", "jax", "jaxlib", "backend", "device", "dtype", "loadavg",
    "timestamp",
]
KEY = ("config_id", "algorithm", "variant", "horizon", "num_iter", "dtype", "backend")
OK_STATUSES = ("ok",)


@dataclass(frozen=True)
class Case:
    spec: ConfigSpec
    algorithm: str
    variant: str
    horizon: int
    num_iter: int


@dataclass(frozen=True)
class Settings:
    """Run-wide settings a worker needs (picklable)."""

    cache: Optional[str]
    dtype: str = "float32"
    tau: float = 1.0
    warmup: int = 2
    rounds: int = 40
    max_time_s: float = 3.0
    packed: bool = True
    builder: Optional[str] = None  # "module:function" used instead of build_inference (tests)


# ---- configuration selection ---------------------------------------------------------------------
def stratified_subset(specs: Sequence[ConfigSpec], per_stratum: int, seed: int = 0,
                      max_total_a: Optional[int] = None, strata: Optional[Callable[[ConfigSpec], Any]] = None
                      ) -> list[ConfigSpec]:
    """``per_stratum`` configurations from every (F, M, regime) stratum, drawn with a fixed seed, interleaved.

    ``max_total_a`` drops configurations whose total A size exceeds it before drawing (a CPU time bound).
    """
    key = strata or (lambda s: (s.F, s.M, s.regime))
    groups: dict[Any, list[ConfigSpec]] = {}
    for s in specs:
        if max_total_a is not None and sum(s.a_elements()) > max_total_a:
            continue
        groups.setdefault(key(s), []).append(s)
    rng = random.Random(seed)
    draws = [rng.sample(groups[k], min(per_stratum, len(groups[k]))) for k in sorted(groups)]
    # Round-robin over the strata (the i-th draw of every stratum, then the (i+1)-th): a time-boxed sweep
    # stopped anywhere still covers every stratum about equally.
    return [d[i] for i in range(max((len(d) for d in draws), default=0)) for d in draws if i < len(d)]


def shard(items: Sequence[Any], spec: Optional[str]) -> list[Any]:
    """``"i/n"``: every n-th item starting at i (0-based)."""
    if not spec:
        return list(items)
    try:
        i, n = (int(x) for x in spec.split("/"))
    except ValueError:
        raise SystemExit(f"--shard: expected i/n with integers, got {spec!r}") from None
    if not (n >= 1 and 0 <= i < n):
        raise SystemExit(f"--shard: expected 0 <= i < n, got {spec!r}")
    return [x for k, x in enumerate(items) if k % n == i]


# ---- CSV -----------------------------------------------------------------------------------------
def row_key(row: dict) -> tuple:
    return tuple(str(row.get(k, "")) for k in KEY)


def read_rows(paths: Iterable[os.PathLike]) -> list[dict]:
    """Rows of one or more benchmark CSVs; a later row with the same key replaces an earlier one."""
    merged: dict[tuple, dict] = {}
    for path in paths:
        path = Path(path)
        if not path.is_file():
            continue
        with path.open(newline="") as fh:
            for row in csv.DictReader(fh):
                merged[row_key(row)] = row
    return list(merged.values())


def write_rows(path: os.PathLike, rows: Sequence[dict]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)


class RowWriter:
    """Appends one row at a time and flushes, so a killed sweep loses at most the case in flight."""

    def __init__(self, path: os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        new = not self.path.is_file() or self.path.stat().st_size == 0
        self._fh = self.path.open("a", newline="")
        self._w = csv.DictWriter(self._fh, fieldnames=COLUMNS, extrasaction="ignore")
        if new:
            self._w.writeheader()
            self._fh.flush()

    def write(self, row: dict) -> None:
        self._w.writerow(row)
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        self._fh.close()


# ---- inputs and the pymdp baseline --------------------------------------------------------------
def make_inputs(spec: ConfigSpec, model, algorithm: str, horizon: int, dtype) -> dict:
    """Seeded one-hot observations, the model's prior D, random actions (T-1, F)."""
    rng = np.random.default_rng([spec.seed, spec.index, 7, ("fpi", "vmp", "mmp").index(algorithm)])
    T = 1 if algorithm == "fpi" else horizon
    obs = []
    for m in spec.num_obs:
        o = np.zeros((T, m), dtype=dtype)
        o[np.arange(T), rng.integers(0, m, size=T)] = 1.0
        obs.append(o[0] if algorithm == "fpi" else o)
    prior = [np.asarray(d, dtype=dtype) for d in model.D]
    actions = None
    if algorithm != "fpi":
        actions = np.stack([rng.integers(0, u, size=max(T - 1, 0)) for u in spec.num_controls], axis=-1)
        actions = actions.astype(np.int32).reshape(max(T - 1, 0), len(spec.num_controls))
    return {"obs": obs, "prior": prior, "actions": actions}


def pymdp_callable(algorithm: str, A_dependencies, B_dependencies, num_iter: int, tau: float):
    """pymdp 1.0.4's algorithm under jax.jit, structure static, arrays as arguments.

    fpi: ``f(A, obs, prior)``; vmp/mmp: ``f(A, B, obs, prior, actions)`` (only the arrays each one reads, so
    pymdp pays no dispatch cost for unused leaves).
    """
    # optional dependency: pymdp (the [bench] extra), through the one pymdp adapter
    from lab.pymdp_oracle import benchmark_callable

    return benchmark_callable(algorithm, A_dependencies, B_dependencies, num_iter, tau)


def _import_builder(path: Optional[str]):
    if not path:
        return build_inference
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _param_count(model, variant: str, estimates: dict) -> tuple[int, str]:
    """Stored elements of the variant's prepared likelihood arrays (``inference.parameter_counts`` on the
    model's arrays), or the structure estimate for a name the registry does not know (test builders)."""
    if variant in VARIANTS:
        return int(parameter_counts(model, variants=[variant])[variant]), "variant"
    return int(estimates.get(variant, estimates["baseline"])), "estimate"


def _max_diff(a: Sequence[Any], b: Optional[Sequence[Any]]) -> float:
    if b is None:
        return float("nan")
    return float(max(np.max(np.abs(np.asarray(x, dtype=np.float64) - np.asarray(y, dtype=np.float64)))
                     for x, y in zip(a, b)))


# ---- running one group of cases (inside the worker) -----------------------------------------------
@dataclass
class _Prepared:
    """A built candidate: its row so far, its list call, and its packed call (None when not timed)."""

    row: dict
    call: Callable[[], Any]
    packed: Optional[Callable[[], Any]] = None


class CaseRunner:
    """Holds the last model, so a configuration's groups share loading."""

    def __init__(self, settings: Settings):
        if settings.dtype == "float64":
            jax.config.update("jax_enable_x64", True)
        self.settings = settings
        self.env = environment(settings.dtype)
        self._model_key = None
        self._model = None
        self._builder = None

    def model(self, spec: ConfigSpec):
        if self._model_key != spec.config_id:
            cache = Path(self.settings.cache) if self.settings.cache else None
            self._model = load_or_build(spec, cache, dtype=np.dtype(self.settings.dtype))
            self._model_key = spec.config_id
        return self._model

    def run_group(self, cases: Sequence[Case]) -> list[dict]:
        """Rows for cases that share (configuration, algorithm, horizon, num_iter), pymdp first: each built
        and called once (compile, execution mode, difference from pymdp), then all timed round-robin."""
        s = self.settings
        spec, algorithm = cases[0].spec, cases[0].algorithm
        model = self.model(spec)
        inp = make_inputs(spec, model, algorithm, cases[0].horizon, np.dtype(s.dtype))
        rows: list[dict] = []
        prepared: dict[str, _Prepared] = {}
        reference = None
        for case in cases:
            try:
                prep = self._prepare(case, model, inp, reference)
            except BaseException as exc:  # noqa: BLE001 - every failure becomes a recorded row
                status, reason = _classify_error(exc)
                if status == "error":
                    traceback.print_exc(file=sys.stderr)
                rows.append({"variant": case.variant, "status": status, "reason": reason})
                continue
            if case.variant == PYMDP:
                reference = prep.row.pop("_outputs")
            prepared[case.variant] = prep
            rows.append(prep.row)
        rr = dict(rounds=s.rounds, max_time_s=s.max_time_s, warmup=s.warmup)
        for name, t in time_round_robin({n: p.call for n, p in prepared.items()}, **rr).items():
            row = prepared[name].row
            row.update(_timing_columns(t, ""))
            row["compile_s"] = max(row["first_call_s"] - t.median_s, 0.0)
        packed = {n: p.packed for n, p in prepared.items() if p.packed is not None}
        for name, t in time_round_robin(packed, **rr).items():
            prepared[name].row.update(_timing_columns(t, "packed_"))
        for row in rows:
            row.setdefault("status", "ok")
            row.setdefault("reason", "")
            row["timing"] = "round_robin"
        return rows

    def _prepare(self, case: Case, model, inp: dict, reference: Optional[list]) -> _Prepared:
        s = self.settings
        est = size_estimates(case.spec)
        obs = [jnp.asarray(o) for o in inp["obs"]]
        prior = [jnp.asarray(p) for p in inp["prior"]]
        actions = None if inp["actions"] is None else jnp.asarray(inp["actions"])
        row: dict[str, Any] = {"variant": case.variant}
        if case.variant == PYMDP:
            t0 = time.perf_counter()
            fn = pymdp_callable(case.algorithm, case.spec.A_dependencies, model.B_dependencies, case.num_iter, s.tau)
            A = [jnp.asarray(a) for a in model.A]
            B = [jnp.asarray(b) for b in model.B]
            row["build_s"] = time.perf_counter() - t0
            args = (A, obs, prior) if case.algorithm == "fpi" else (A, B, obs, prior, actions)
            t0 = time.perf_counter()
            out, modes = capture_modes(lambda: block(fn(*args)))
            row["first_call_s"] = time.perf_counter() - t0
            row["exec_mode"] = program_label(modes, "jit_")
            row["_outputs"] = [np.asarray(x) for x in out]
            # likelihood arrays only, like the variants' counts (pymdp stores A and takes its log per call)
            row["param_count"] = est["baseline"]
            row["param_count_source"] = "A arrays"
            row["max_abs_diff_vs_pymdp"] = 0.0
            return _Prepared(row, lambda: fn(*args))
        if self._builder is None:
            self._builder = _import_builder(s.builder)
        t0 = time.perf_counter()
        variant = case.variant
        if variant == AUTO:
            engine, variant, row["reason"] = auto_engine(case, model, s.tau)
        else:
            engine = self._builder(case.algorithm, model.A, model.A_dependencies, model.B, model.B_dependencies,
                                   variant=variant, num_iter=case.num_iter, tau=s.tau)
        row["build_s"] = time.perf_counter() - t0
        list_args = (obs, prior) if case.algorithm == "fpi" else (obs, prior, actions)
        t0 = time.perf_counter()
        out, modes = capture_modes(lambda: block(engine(*list_args)))
        row["first_call_s"] = time.perf_counter() - t0
        if engine.capabilities.runtime == "xla":
            row["exec_mode"] = program_label(modes, "_packed_lists_impl")  # the list call's program
        else:  # a native engine: fused_numba on the CPU, fused_cuda on a GPU
            row["exec_mode"] = "native" if engine.device == "cpu" else f"native_{engine.device}"
        row["max_abs_diff_vs_pymdp"] = _max_diff(out, reference)
        row["param_count"], row["param_count_source"] = _param_count(model, variant, est)
        packed = None
        if s.packed:
            layout = engine.layout
            packed_args = (jnp.asarray(layout.pack_obs(inp["obs"])), jnp.asarray(layout.pack_states(inp["prior"])))
            if case.algorithm != "fpi":
                packed_args += (actions,)
            packed = lambda: engine.run_packed(*packed_args)  # noqa: E731
        return _Prepared(row, lambda: engine(*list_args), packed)


def auto_engine(case: Case, model, tau: float) -> tuple[Any, str, str]:
    """The node's ``auto`` decision for ``case`` (every device here, verify step on, no decision cache): (engine,
    chosen variant, "chose <variant>@<platform>")."""
    config = EngineConfig(case.algorithm, "auto", case.num_iter, tau, case.horizon, AUTO_VERIFY_TOP_K, "auto")
    decision = decide(model, config, MemoryBudget.from_gib(DEFAULT_MEMORY_BUDGET_GB))
    return decision.engine, decision.variant, f"chose {decision.variant}@{decision.platform}"


def _timing_columns(t: CandidateTiming, prefix: str) -> dict:
    """A round-robin timing as row columns: ``time_s`` (the ranking statistic) is also written as ``p10_s``;
    ``repeats`` counts rounds; compile is the first call beyond a steady-state call."""
    cols = {f"{prefix}compile_s": max(t.first_call_s - t.median_s, 0.0), f"{prefix}median_s": t.median_s,
            f"{prefix}p10_s": t.time_s, f"{prefix}p90_s": t.p90_s, f"{prefix}repeats": t.rounds}
    if not prefix:
        cols["time_s"] = t.time_s
    return cols


def _classify_error(exc: BaseException) -> tuple[str, str]:
    name = type(exc).__name__
    msg = f"{name}: {exc}".replace("\n", " ")[:300]
    if name == "VariantUnsupported":
        return "unsupported", msg
    if isinstance(exc, MemoryError) or "RESOURCE_EXHAUSTED" in msg or "out of memory" in msg.lower():
        return "skipped_memory", msg
    return "error", msg


def _worker_main(conn, settings: Settings) -> None:
    runner = CaseRunner(settings)
    conn.send(("ready", runner.env))
    while True:
        msg = conn.recv()
        if msg is None:
            return
        cases: list[Case] = msg
        try:
            rows = runner.run_group(cases)
        except BaseException as exc:  # noqa: BLE001 - every failure becomes a recorded row
            status, reason = _classify_error(exc)
            traceback.print_exc(file=sys.stderr)
            rows = [{"variant": c.variant, "status": status, "reason": reason} for c in cases]
        conn.send(("rows", rows))


@contextlib.contextmanager
def restored_environment(names: Iterable[str]) -> Iterator[None]:
    """Set what a spawned child must read at its start inside the block; ``names`` are as before on exit."""
    saved = {k: os.environ.get(k) for k in names}
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class Worker:
    """A child process that runs cases; killed and replaced on a timeout or a crash."""

    def __init__(self, settings: Settings):
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, settings), daemon=True)
        # The child starts with XLA:CPU's execution-mode log on (XLA reads it when jax is first imported,
        # which in a spawned child happens before any of our code runs).
        with restored_environment((*LOG_ENV, "JAX_PLATFORMS")):
            os.environ.setdefault("JAX_PLATFORMS", "cpu")
            if os.environ["JAX_PLATFORMS"] == "cpu":
                os.environ.update(LOG_ENV)
            self.proc.start()
        child.close()
        if not self.conn.poll(180):
            self.kill()
            raise RuntimeError("benchmark worker did not start within 180 s")
        kind, self.env = self.conn.recv()

    def run(self, cases: list[Case], time_limit: float) -> Optional[list[dict]]:
        """One row per case, or None when the group ran past ``time_limit`` (the worker is then dead)."""
        self.conn.send(cases)
        if not self.conn.poll(time_limit):
            self.kill()
            return None
        try:
            kind, rows = self.conn.recv()
        except (EOFError, ConnectionResetError):
            self.kill()
            return [{"variant": c.variant, "status": "error",
                     "reason": "worker died (killed by the OS, likely out of memory)"} for c in cases]
        return rows

    def alive(self) -> bool:
        return self.proc.is_alive()

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)

    def close(self) -> None:
        if self.proc.is_alive():
            try:
                self.conn.send(None)
            except (BrokenPipeError, OSError):
                pass
            self.proc.join(10)
        self.kill()


# ---- the sweep -----------------------------------------------------------------------------------
def plan_cases(specs: Sequence[ConfigSpec], algorithms: Sequence[str], variants: Sequence[str],
               horizon: int, num_iter: int, include_pymdp: bool = True) -> list[Case]:
    """pymdp first within each (config, algorithm), so variants can be compared with its result."""
    cases = []
    for spec in specs:
        for alg in algorithms:
            for v in ([PYMDP] if include_pymdp else []) + [v for v in variants if v != PYMDP]:
                cases.append(Case(spec, alg, v, horizon if alg != "fpi" else 1, num_iter))
    return cases


def _over_budget(variant: str, spec: ConfigSpec, budget: MemoryBudget, itemsize: int, est: dict) -> str:
    """Why ``variant`` is skipped on ``spec`` (the node's budget check), or "" when it fits (pymdp always runs)."""
    if variant in (PYMDP, AUTO):  # pymdp always runs; auto holds itself to the node's budget
        return ""
    return budget.refusal(variant, spec, itemsize, est)


@dataclass(frozen=True)
class SweepLimits:
    """A sweep's limits: a variant estimated over ``memory_budget_gb`` is skipped before it is built; a case over
    ``case_time_limit`` seconds is killed and recorded as a timeout; no case starts after ``max_minutes``."""

    memory_budget_gb: float = DEFAULT_MEMORY_BUDGET_GB
    case_time_limit: float = DEFAULT_CASE_TIME_LIMIT
    max_minutes: Optional[float] = None


def run_sweep(
    specs: Sequence[ConfigSpec],
    out_csv: os.PathLike,
    algorithms: Sequence[str] = DEFAULT_ALGORITHMS,
    variants: Optional[Sequence[str]] = None,
    horizon: int = DEFAULT_HORIZON,
    num_iter: int = DEFAULT_NUM_ITER,
    settings: Optional[Settings] = None,
    limits: Optional[SweepLimits] = None,
    retry_failed: bool = False,
    progress: bool = True,
    include_pymdp: bool = True,
    skip: Optional[dict[tuple[str, str, str], tuple[str, str]]] = None,
) -> dict:
    """Run (or resume) a sweep; returns counts by status. Rows are appended to ``out_csv`` as they finish.

    ``limits``: the memory budget, the case time limit and the time box (:class:`SweepLimits`).
    ``skip``: (config_id, algorithm, variant) -> (status, reason) of cases recorded without being built (e.g. a
    compile that did not fit a time budget).
    """
    settings = settings or Settings(cache=str(DEFAULT_CACHE))
    limits = limits or SweepLimits()
    budget = MemoryBudget.from_gib(limits.memory_budget_gb, "--memory-budget-gb")
    case_time_limit, max_minutes = limits.case_time_limit, limits.max_minutes
    if variants is None:
        variants = list(VARIANTS)
    env = environment(settings.dtype)
    itemsize = np.dtype(settings.dtype).itemsize
    done = {}
    for r in read_rows([out_csv]):
        if r.get("backend") == env["backend"] and (not retry_failed or r.get("status") not in ("timeout", "error")):
            done[row_key(r)] = r
    cases = plan_cases(specs, algorithms, variants, horizon, num_iter, include_pymdp)
    groups: dict[tuple, list[Case]] = {}
    for c in cases:
        groups.setdefault((c.spec.config_id, c.algorithm, c.horizon, c.num_iter), []).append(c)
    # a group with any case missing runs again whole, so its rows come from one round-robin
    todo = [g for g in groups.values() if any(_case_key(c, env) not in done for c in g)]
    counts: dict[str, int] = {"resumed": len(cases) - sum(len(g) for g in todo)}
    writer = RowWriter(out_csv)
    worker: Optional[Worker] = None
    bar = tqdm(total=sum(len(g) for g in todo), unit="case", dynamic_ncols=True, disable=not progress)
    started = time.time()
    try:
        for group in todo:
            if max_minutes is not None and time.time() - started > 60 * max_minutes:
                counts["stopped_at_time_limit"] = 1
                break
            spec = group[0].spec
            est = size_estimates(spec)
            base: dict[str, dict] = {}
            rows: dict[str, dict] = {}
            runnable: list[Case] = []
            for case in group:
                peak = peak_elements(case.variant if case.variant not in (PYMDP, AUTO) else "baseline", est)
                base[case.variant] = {
                    "config_id": spec.config_id, "stratum": spec.stratum, "F": spec.F, "M": spec.M,
                    "algorithm": case.algorithm, "variant": case.variant, "horizon": case.horizon,
                    "num_iter": case.num_iter, "est_peak_elements": peak}
                refused = _over_budget(case.variant, spec, budget, itemsize, est)
                skipped = (skip or {}).get((spec.config_id, case.algorithm, case.variant))
                if refused:
                    rows[case.variant] = {"status": "skipped_memory", "reason": refused,
                                          "param_count": est.get(case.variant, ""), "param_count_source": "estimate"}
                elif skipped:
                    count = est["baseline"] if case.variant == PYMDP else est.get(case.variant, "")
                    rows[case.variant] = {"status": skipped[0], "reason": skipped[1], "param_count": count,
                                          "param_count_source": "estimate"}
                else:
                    runnable.append(case)
            if runnable:
                if worker is None or not worker.alive():
                    worker = Worker(settings)
                got = worker.run(runnable, case_time_limit * len(runnable))
                if got is None:  # one case ran away: each case again on its own (pymdp beside it)
                    worker = None
                    got = []
                    ref = [c for c in runnable if c.variant == PYMDP]
                    for case in runnable:
                        if worker is None or not worker.alive():
                            worker = Worker(settings)
                        alone = ref + [case] if case.variant != PYMDP else [case]
                        one = worker.run(alone, case_time_limit * len(alone))
                        if one is None:
                            worker = None
                            one = [{"variant": case.variant, "status": "timeout",
                                    "reason": f"over the {case_time_limit:.0f} s case limit"}]
                        got.append({**one[-1], "timing": "round_robin_with_pymdp_only"})
                rows.update({r["variant"]: r for r in got})
            stamp = {"loadavg": loadavg(), "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())}
            for case in group:
                row = {**base[case.variant], **env, **rows[case.variant], **stamp}
                writer.write(row)
                counts[row["status"]] = counts.get(row["status"], 0) + 1
            bar.set_postfix_str(f"{spec.config_id} {group[0].algorithm}")
            bar.update(len(group))
    finally:
        bar.close()
        writer.close()
        if worker is not None:
            worker.close()
    return counts


def _case_key(case: Case, env: dict) -> tuple:
    row = {"config_id": case.spec.config_id, "algorithm": case.algorithm, "variant": case.variant,
           "horizon": case.horizon, "num_iter": case.num_iter, "dtype": env["dtype"], "backend": env["backend"]}
    return row_key(row)


def select_configs(args, specs: Sequence[ConfigSpec]) -> list[ConfigSpec]:
    if args.ids:  # in the order given, so a time-boxed run does the first ones first
        by_id = {s.config_id: s for s in specs}
        unknown = [i for i in args.ids if i not in by_id]
        if unknown:
            raise SystemExit(f"--ids: no such configuration {', '.join(unknown[:5])} "
                             f"(ids run c0000..c{len(specs) - 1:04d})")
        specs = [by_id[i] for i in dict.fromkeys(args.ids)]
    if args.max_total_a is not None:
        specs = [s for s in specs if sum(s.a_elements()) <= args.max_total_a]
    if args.min_total_a is not None:
        specs = [s for s in specs if sum(s.a_elements()) >= args.min_total_a]
    if args.modalities:
        specs = [s for s in specs if s.M in set(args.modalities)]
    if args.max_fm is not None:
        specs = [s for s in specs if s.F <= args.max_fm and s.M <= args.max_fm]
    if args.exclude:
        specs = [s for s in specs if s.config_id not in set(args.exclude)]
    if args.per_stratum:
        specs = stratified_subset(specs, args.per_stratum, seed=args.subset_seed)
    if args.limit is not None:
        specs = specs[: args.limit]
    return shard(specs, args.shard)


def add_common_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="generator cache folder")
    p.add_argument("--algorithms", nargs="+", default=list(DEFAULT_ALGORITHMS), choices=DEFAULT_ALGORITHMS)
    p.add_argument("--variants", nargs="+", help="default: every name in VARIANTS (pymdp always runs); auto: the node's "
                   "device and variant decision, timed beside them")
    p.add_argument("--horizon", type=int, default=DEFAULT_HORIZON, help="window T for vmp/mmp")
    p.add_argument("--num-iter", type=int, default=DEFAULT_NUM_ITER)
    p.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    p.add_argument("--memory-budget-gb", type=float, default=DEFAULT_MEMORY_BUDGET_GB)
    p.add_argument("--case-time-limit", type=float, default=DEFAULT_CASE_TIME_LIMIT,
                   help="seconds per case (a group of n cases gets n times this)")
    p.add_argument("--rounds", type=int, default=40, help="round-robin rounds per group (at most)")
    p.add_argument("--max-time", type=float, default=3.0, help="seconds of round-robin timing per group (at most)")
    p.add_argument("--no-packed", action="store_true", help="skip timing the packed API")
    p.add_argument("--retry-failed", action="store_true", help="rerun cases recorded as timeout/error")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--max-minutes", type=float, help="start no new case after this many minutes")


def limits_from_args(args) -> SweepLimits:
    return SweepLimits(args.memory_budget_gb, args.case_time_limit, args.max_minutes)


def settings_from_args(args) -> Settings:
    return Settings(cache=str(args.cache), dtype=args.dtype, rounds=args.rounds, max_time_s=args.max_time,
                    packed=not args.no_packed)


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab bench", description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=Path("benchmarks/sweep_cpu.csv"), help="CSV (appended, resumed)")
    add_common_arguments(p)
    p.add_argument("--ids", nargs="+", help="only these config ids, in this order")
    p.add_argument("--per-stratum", type=int, help="stratified subset: N configs per (F, M, regime)")
    p.add_argument("--subset-seed", type=int, default=0)
    p.add_argument("--max-total-a", type=int, help="drop configs whose total A size exceeds this")
    p.add_argument("--min-total-a", type=int, help="drop configs whose total A size is below this")
    p.add_argument("--modalities", type=int, nargs="+", help="only configs with one of these M")
    p.add_argument("--max-fm", type=int, help="drop configs with more factors or modalities than this")
    p.add_argument("--exclude", nargs="+", help="config ids to leave out")
    p.add_argument("--limit", type=int)
    p.add_argument("--shard", help="i/n: this machine's share (0 <= i < n)")
    p.add_argument("--merge", nargs="+", metavar=("OUT", "IN"), help="merge CSVs into OUT and exit")
    p.add_argument("--list", action="store_true", help="print the selected config ids and exit")
    args = p.parse_args(argv)

    if args.merge:
        if len(args.merge) < 2:
            p.error("--merge OUT IN [IN ...]")
        rows = read_rows(args.merge[1:])
        write_rows(args.merge[0], rows)
        print(f"merged {len(rows)} rows into {args.merge[0]}")
        return 0
    try:
        specs = read_index(args.cache)
    except FileNotFoundError:
        specs = generate_specs()
    chosen = select_configs(args, specs)
    if args.list:
        print(" ".join(s.config_id for s in chosen))
        return 0
    t0 = time.time()
    counts = run_sweep(chosen, args.out, args.algorithms, args.variants, args.horizon, args.num_iter,
                       settings_from_args(args), limits_from_args(args), args.retry_failed,
                       progress=not args.no_progress)
    print(f"{len(chosen)} configurations, {time.time() - t0:.0f} s: {counts} -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
