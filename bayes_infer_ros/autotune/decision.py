"""The one decision: which device and variant run a model, decided without building anything (the building is
``deployment``'s). One short pipeline, used by the node, ``bayes-infer warmup``, ``select_variant`` and the
benchmarks:

    candidates -> decision cache -> start -> verification -> record

    plan = plan_decision(model, config, budget, cache=cache)   # milliseconds, nothing built: what starts, what
                                                               # is verified, what is left out and why
    deployment = deploy(model, config, budget)                 # deployment.py: the engine that runs at once
    timings, errors = verify_candidates(model, config, plan.timed, found)   # deployment.py; the node: in a child
    outcome = conclude(plan, timings, errors, cache)           # swap only beyond the noise; kept on disk

``deployment.decide`` runs the whole pipeline here, in order.

**Candidates** are (device, variant) pairs on the devices ``config.device`` allows ("auto" | "cpu" | "gpu"; a GPU
must pass the self-test, ``devices.find_devices``), per device:

- a variant given by name: that variant, on every allowed device it runs on;
- ``variant: auto`` where the device's training data had one winner on every configuration (the host CPU with numba
  installed: ``fused_numba``, ``models/cpu_meta.json``): there is no choice to rank. That variant starts; ``baseline``
  is verified unless it is predicted to lose by a wide margin on this model (``select.predict_slowdown``: the most
  similar training models), in which case it is not compiled at all;
- ``variant: auto`` where there is a choice (a GPU, a CPU without numba): the device's ranking model
  (``select.ranking``: classifier, size guard, memory budget). Its first pick starts; its next ``k - 1`` picks, the
  device's native engines it was not trained on (an untrained candidate runs only once verified) and ``baseline``
  are verified.

The first device's start runs at once; the other devices' candidates are verified. Each candidate left out says why.

**Decision cache** (:class:`DecisionCache`). A verified answer is kept on disk and starts without verifying while
the model's structure, the settings, the devices found, the machine (host name, processor, CPU count) and the versions
of the package, jax, jaxlib and numba stay the same; any change there is a miss, and the verify step runs again.
``bayes-infer warmup`` fills it for the shipped model. Folder: ``$BAYES_INFER_DECISION_CACHE`` when set (``off``
turns the cache off), else ``$XDG_CACHE_HOME/bayes_infer_ros/decisions`` (``~/.cache/...``). An unwritable or full
folder is not an error: the record is not kept, and ``DecisionCache.warnings`` says why once. A record is untrusted
input: one that cannot be used (not JSON, a field missing or of the wrong type, timings that are not seconds, another
key's record, a directory in the file's place; a candidate that is not one here, or that no longer builds) is a
miss: ``refuse`` adds one warning naming the file, the candidates are timed again, and the new record replaces it.

**Verify** (``autotune_verify_top_k`` = k > 0): the start and the candidates to verify are built and timed
round-robin (``timing.time_round_robin``) on the call the node makes per tick (``select.engine_call``). A candidate
replaces the start only when it wins beyond the measured noise: faster in at least 3 of 4 rounds, compared round by
round (a preempted round slows whichever ran in it), and by more than 5% in the median round. k = 0: nothing is
verified. A candidate that fails to build or to run drops out with its reason.

**Fallback.** Where the autotuner fails (a broken model file), ``baseline`` on the first device.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.metadata
import json
import math
import os
import platform
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from ..inference import VariantUnsupported
from ..inference.algorithm_specs import algorithm_spec
from ..inference.registry import NATIVE_VARIANTS, VARIANT_PLATFORMS, VARIANTS
from . import devices as device_lookup
from .select import FALLBACK, MemoryBudget, device_candidates
from .timing import CandidateTiming

#: The verify step's round-robin: at most this many rounds, stopping after this many seconds of timing (it runs off
#: the tick path: rounds are cheap, and the more of them, the surer the round-by-round comparison under load).
VERIFY_ROUNDS = 100
VERIFY_MAX_TIME_S = 3.0
#: A candidate replaces the start only when it was faster in at least this share of the rounds they were timed in
#: together (a sign test: under load a preempted round slows either one, so rounds are compared pairwise) ...
WIN_SHARE = 0.75
#: ... and by more than this in its median round (a tie within the round-robin's noise floor keeps the start:
#: benchmarks/noise_floor_engine_cpu.txt).
TIE = 0.05


@dataclass(frozen=True)
class EngineConfig:
    """What an engine is built from. ``variant`` and ``device`` may be "auto"; ``agents``: the b agents of the model
    one engine serves (b rows of each call); ``evidence``: each step also computes its evidence (surprise, gates,
    free energy), so that is the call compiled and timed. Every field is part of the decision's key: the same model
    decided for one agent and for a fleet, or with and without the evidence, are two decisions."""

    algorithm: str
    variant: str = "auto"
    num_iter: int = 16
    tau: float = 1.0
    horizon: int = 1
    autotune_verify_top_k: int = 3
    device: str = "auto"
    agents: int = 1
    evidence: bool = False
    #: the horizon the ranking reads: ``horizon`` for an algorithm with a window, 1 for one without (set from
    #: ``algorithm``, which is checked here: an unknown name is refused naming the field)
    ranked_horizon: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.variant != "auto" and self.variant not in VARIANTS:
            raise ValueError(f"variant: unknown {self.variant!r}; expected 'auto' or one of {list(VARIANTS)}")
        window = algorithm_spec(self.algorithm).window
        object.__setattr__(self, "ranked_horizon", int(self.horizon) if window else 1)


@dataclass(frozen=True)
class Candidate:
    """A variant on a device platform ("cpu" | "gpu")."""

    platform: str
    variant: str

    def __str__(self) -> str:
        return f"{self.variant}@{self.platform}"


@dataclass(frozen=True)
class Pinned:
    """A deployment of one candidate, as a verify step measured it (``note``: its outcome), for the settings
    ``config``."""

    config: EngineConfig
    candidate: Candidate
    note: str


@dataclass(frozen=True)
class Plan:
    """What starts, what is verified off the tick path, what is left out, and why; nothing built yet.

    start:     runs at once
    verify:    timed against ``start`` (empty: nothing to verify)
    skipped:   (candidate, why) for each candidate left out: never compiled
    reason:    why ``start`` (one line)
    notes:     the devices' notes (a GPU left out, and why)
    cache_key: the decision cache's key ("" without a cache)
    uncached:  where ``start`` comes from the decision cache, the plan without it (the kept choice no longer builds)
    """

    config: EngineConfig
    start: Candidate
    verify: tuple[Candidate, ...] = ()
    skipped: tuple[tuple[Candidate, str], ...] = ()
    reason: str = ""
    notes: tuple[str, ...] = ()
    cache_key: str = ""
    devices: device_lookup.Devices = field(default_factory=device_lookup.Devices, compare=False)
    uncached: Optional["Plan"] = field(default=None, compare=False)
    cache: Optional[DecisionCache] = field(default=None, compare=False)

    @property
    def timed(self) -> tuple[Candidate, ...]:
        """What the verify step times: the start, then the candidates to verify."""
        return (self.start,) + self.verify

    def describe(self) -> str:
        """One line for the log and diagnostics: what runs and why, what is verified, what is left out."""
        parts = [f"runs {self.start} ({self.reason})"]
        if self.verify:
            parts.append(f"verifying {', '.join(map(str, self.verify))} off the tick path")
        parts += [f"not compiled: {c} ({why})" for c, why in self.skipped]
        return "; ".join(parts + list(self.notes))


@dataclass(frozen=True)
class Outcome:
    """The verify step's result: ``run`` runs from now on (``swap``: it is not the plan's start), the timings by
    ``str(candidate)``, the candidates that did not run (``errors``), and one line saying all that."""

    run: Candidate
    swap: bool
    timings: dict[str, CandidateTiming]
    errors: dict[str, str]
    reason: str


# ---- candidates ---------------------------------------------------------------------------------------------------
def candidates(model: Any, config: EngineConfig, budget: MemoryBudget, platforms: Sequence[str],
               model_dir: Any = None, native_only: Sequence[str] = ()) -> list[Candidate]:
    """Every (device, variant) candidate for ``config`` that the verify step would time, the start first, devices in
    order (``native_only``: platforms where JAX has no device, numba's CUDA target only). A variant given by name that
    cannot run on any of ``platforms`` raises VariantUnsupported, one over the budget MemoryBudgetExceeded."""
    return list(_candidates(model, config, budget, platforms, model_dir, native_only)[0])


def _candidates(model: Any, config: EngineConfig, budget: MemoryBudget, platforms: Sequence[str], model_dir: Any,
                native_only: Sequence[str]) -> tuple[list[Candidate], list[tuple[Candidate, str]], str]:
    if config.variant != "auto":
        runs_on = VARIANT_PLATFORMS[config.variant]
        native = config.variant in NATIVE_VARIANTS
        out = [Candidate(p, config.variant) for p in platforms if p in runs_on and (p not in native_only or native)]
        if not out:
            raise VariantUnsupported(f"variant {config.variant} runs on {' or '.join(runs_on)}"
                                     f"; device: {config.device} allows {' and '.join(platforms) or 'no device here'}")
        budget.check(config.variant, model)
        return out, [], "requested"
    pool: list[Candidate] = []
    skipped: list[tuple[Candidate, str]] = []
    reason = ""
    for p in platforms:
        found = device_candidates(model, config, budget, p, p in native_only, model_dir)
        pool += [Candidate(p, v) for v in found.order]
        skipped += [(Candidate(p, v), why) for v, why in found.skipped.items()]
        reason = reason or found.reason
    return pool, skipped, reason


def _cache_parts(model: Any, config: EngineConfig, budget: MemoryBudget, platforms: Sequence[str]) -> dict:
    """What a kept decision is keyed by. The settings are read at the horizon the verify step times
    (``ranked_horizon``): an FPI decision does not depend on the node's ``horizon``, so changing it finds the same
    record (an algorithm with a window keeps its horizon in the key)."""
    structure = model.structure if hasattr(model, "structure") else model
    timed = dataclasses.replace(config, horizon=config.ranked_horizon)
    return {"structure": repr(structure), "config": repr(timed), "budget": budget.bytes, "platforms": list(platforms)}


def plan_decision(model: Any, config: EngineConfig, budget: MemoryBudget, *,
                  found: Optional[device_lookup.Devices] = None, model_dir: Any = None,
                  cache: Optional[DecisionCache] = None, pin: Optional[Pinned] = None) -> Plan:
    """What starts, what is verified and what is left out for ``model`` under ``config`` and ``budget`` (the policy
    is the module's); builds nothing.

    found: the devices to consider (default ``devices.find_devices(config.device)``)
    cache: verified decisions on disk (default: none; the node passes ``DecisionCache.from_environment()``)
    pin:   the candidate a verify step measured faster: the plan runs it, and verifies nothing

    Raises ``DeviceUnavailable`` (device: gpu without a working GPU), ``MemoryBudgetExceeded`` and
    ``VariantUnsupported`` (a named variant that cannot run here); ``variant: auto`` falls back instead.
    """
    found = found if found is not None else device_lookup.find_devices(config.device)
    if pin is not None:
        return Plan(config, pin.candidate, reason=f"the verify step: {pin.note}", devices=found)
    platforms = list(found.by_platform)
    native_only = [p for p, d in found.by_platform.items() if isinstance(d, device_lookup.NumbaCudaDevice)]
    jax_platforms = [p for p in platforms if p not in native_only]  # where the baseline (a JAX program) runs
    notes = (found.note,) if found.note else ()
    base = Plan(config, Candidate(jax_platforms[0] if jax_platforms else platforms[0], FALLBACK), notes=notes,
                devices=found)
    # the key of a kept decision (its record is read once the plan has something to verify)
    cache_key = DecisionCache.key(_cache_parts(model, config, budget, platforms)) if cache is not None else ""
    try:
        pool, skipped, reason = _candidates(model, config, budget, platforms, model_dir, native_only)
    except VariantUnsupported:
        raise
    except Exception as exc:  # noqa: BLE001 - the documented fallback of variant: auto
        if config.variant != "auto" or not jax_platforms:
            raise
        return dataclasses.replace(base, reason=f"autotuner unavailable ({type(exc).__name__}: {str(exc)[:120]}); "
                                                f"rule: {FALLBACK}")
    if not pool and jax_platforms:  # nothing fits: the baseline runs every model
        pool = [base.start]
    if not pool:
        raise VariantUnsupported(f"no variant can run this model on {', '.join(platforms)} (numba's CUDA target only)")
    verify_top_k = config.autotune_verify_top_k if config.variant == "auto" else 1
    start, rest = pool[0], tuple(pool[1:])
    if verify_top_k <= 0:
        skipped += [(c, "autotune_verify_top_k is 0: not verified") for c in rest]
        rest = ()
    plan = dataclasses.replace(base, start=start, verify=rest, skipped=tuple(skipped), reason=reason)
    if cache is None or not rest:
        return plan
    plan = dataclasses.replace(plan, cache_key=cache_key, cache=cache)
    record = cache.load(plan.cache_key)  # None for a record that cannot be used: refused, with a warning
    if record is None:
        return plan
    kept = Candidate(record["device"], record["variant"])
    problem = _plan_problem(record, kept, plan)
    if problem is not None:
        cache.refuse(plan.cache_key, problem)
        return plan
    return dataclasses.replace(plan, start=kept, verify=(), uncached=plan, reason=(
        f"timed here at {record['created']}: {_format(record['timings'])}; decision cache"))


def _plan_problem(record: Mapping[str, Any], chosen: Candidate, plan: Plan) -> Optional[str]:
    """Why a well-formed kept ``record`` (:func:`record_problem` passed) does not fit ``plan`` (None: it
    does): its choice must be a candidate here, its timings those of this plan's candidates, and its choice the start
    or faster than the start in them (the verify step replaces the start only with a faster candidate)."""
    names = [str(c) for c in plan.timed]
    if chosen not in plan.timed:
        return f"it names {chosen}, not a candidate here ({', '.join(names)})"
    timings = record["timings"]
    if set(timings) != set(names):
        return f"its timings name {', '.join(sorted(timings)) or 'nothing'}, not this decision's candidates"
    if chosen != plan.start and not timings[str(chosen)] < timings[str(plan.start)]:
        return f"its choice {chosen} is not faster than {plan.start} in its own timings"
    return None


def wins_beyond_noise(challenger: CandidateTiming, running: CandidateTiming) -> bool:
    """Round by round (both timed in each round, back to back), the challenger was faster in at least ``WIN_SHARE``
    of the rounds and by more than ``TIE`` in the median round. Without per-round samples: its 90th percentile under
    the running engine's 10th."""
    pairs = np.array(list(zip(challenger.samples, running.samples)), dtype=float)
    if not len(pairs):
        return challenger.p90_s < running.time_s
    ratios = pairs[:, 0] / pairs[:, 1]
    return bool(np.mean(ratios < 1.0) >= WIN_SHARE and np.median(ratios) < 1.0 - TIE)


def _share_faster(challenger: CandidateTiming, running: CandidateTiming) -> float:
    pairs = list(zip(challenger.samples, running.samples))
    return sum(c < r for c, r in pairs) / len(pairs) if pairs else float(challenger.p90_s < running.time_s)


def conclude(plan: Plan, timings: Mapping[str, CandidateTiming], errors: Mapping[str, str],
             cache: Optional[DecisionCache] = None) -> Outcome:
    """What runs after the verify step: the plan's start, unless a candidate won beyond the measured noise (or the
    start itself did not run); kept in ``cache`` under the plan's key."""
    start = str(plan.start)
    by_name = {str(c): c for c in plan.timed}
    ran = {n: t for n, t in timings.items() if n in by_name}
    failed = "".join(f"; {n} did not run ({why})" for n, why in errors.items())
    if not ran:
        return Outcome(plan.start, False, {}, dict(errors),
                       f"keeps {start}: no candidate ran in the verify step{failed}")
    best = min(ran, key=lambda n: ran[n].time_s)
    winners = [n for n in ran if n != start and start in ran and wins_beyond_noise(ran[n], ran[start])]
    if start not in ran:
        run, why = best, f"{start} did not run in the verify step"
    elif winners:
        run = min(winners, key=lambda n: ran[n].time_s)
        why = f"faster than {start} beyond the noise (in {_share_faster(ran[run], ran[start]):.0%} of the rounds)"
    else:
        run, why = start, ("the fastest" if best == start else f"{best} is not faster beyond the noise")
    swap = run != start
    measured = ", ".join(f"{n} {t.time_s * 1e3:.3g} ms (p90 {t.p90_s * 1e3:.3g})" for n, t in ran.items())
    reason = f"{'swaps to' if swap else 'keeps'} {run}: {why}; timed here: {measured}{failed}"
    if cache is not None and plan.cache_key:
        winner = by_name[run]
        cache.store(plan.cache_key, winner.platform, winner.variant,
                    {n: ran[n].time_s if n in ran else float("inf") for n in by_name})  # inf: did not run
    return Outcome(by_name[run], swap, dict(ran), dict(errors), reason)


def _format(timings: Mapping[str, float]) -> str:
    return ", ".join(f"{name} {t * 1e3:.3g} ms" for name, t in timings.items())


# ---- the decision cache -------------------------------------------------------------------------------------------
ENV = "BAYES_INFER_DECISION_CACHE"
MAX_RECORD_BYTES = 65536  # a record is a few hundred bytes: a larger file is not one


def default_folder() -> Optional[Path]:
    """The cache folder from the environment (None: turned off)."""
    value = os.environ.get(ENV, "")
    if value.lower() in ("off", "0", "false", "none"):
        return None
    if value:
        return Path(value).expanduser()
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "bayes_infer_ros" / "decisions"


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return ""


def machine_fingerprint() -> dict[str, Any]:
    """What a timing on this machine depends on besides the model and the settings."""
    return {"host": socket.gethostname(), "machine": platform.machine(), "processor": platform.processor(),
            "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
            "versions": {d: _version(d) for d in ("bayes_infer_ros", "jax", "jaxlib", "numba")}}


def record_problem(record: Any, key: str) -> Optional[str]:
    """Why ``record`` (parsed JSON) is not a usable record for ``key`` (None: it is)."""
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not an object"
    for name, kind in (("key", str), ("device", str), ("variant", str), ("created", str), ("timings", dict)):
        if name not in record:
            return f"no {name!r} field" + (" (written by an older version, or damaged)" if name == "key" else "")
        if not isinstance(record[name], kind):
            expected = "object" if kind is dict else "string"
            return f"{name!r} is {json.dumps(record[name])[:60]}, expected a JSON {expected}"
    if record["key"] != key:
        return f"it is the record of another model or setting (key {record['key'][:40]!r})"
    for name, seconds in record["timings"].items():
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or math.isnan(seconds) or seconds < 0:
            return f"timings[{name!r}] is {json.dumps(seconds)[:40]}, expected seconds >= 0"
    return None


@dataclass
class DecisionCache:
    """Load and store verified decisions (``{"key", "device", "variant", "timings", "created"}``) by key.

    ``warnings``: what went wrong with the folder or a record, each once (an unwritable folder, a refused record
    naming its file)."""

    folder: Optional[Path]
    warnings: list[str] = field(default_factory=list)
    refused: set[Path] = field(default_factory=set)

    @classmethod
    def from_environment(cls) -> "DecisionCache":
        return cls(default_folder())

    @staticmethod
    def key(parts: dict[str, Any]) -> str:
        text = json.dumps({**parts, "machine": machine_fingerprint()}, sort_keys=True, default=repr)
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def path(self, key: str) -> Optional[Path]:
        return None if self.folder is None else self.folder / f"{key}.json"

    def _warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def refuse(self, key: str, reason: str) -> None:
        """The record of ``key`` cannot be used (``reason``): a miss, with one warning naming its file."""
        path = self.path(key)
        if path is None or path in self.refused:
            return
        self.refused.add(path)
        if path.is_dir():
            self._warn(f"decision cache: {path} is a directory, not a record: each start times the candidates again "
                       "until it is removed")
        else:
            self._warn(f"decision cache: {path} is not used ({reason}): the candidates are timed again and the new "
                       "decision replaces it")

    def load(self, key: str) -> Optional[dict[str, Any]]:
        """The record of ``key``; None when there is none, or when it cannot be used (``refuse``d)."""
        path = self.path(key)
        if path is None or not (path.exists() or path.is_symlink()):
            return None
        try:
            if path.is_dir():
                raise IsADirectoryError(f"{path} is a directory")
            if path.stat().st_size > MAX_RECORD_BYTES:
                raise ValueError(f"{path.stat().st_size} bytes, larger than any record")
            record = json.loads(path.read_bytes().decode("utf-8"))
        except (OSError, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            self.refuse(key, f"{type(exc).__name__}: {' '.join(str(exc).split())[:120]}")
            return None
        problem = record_problem(record, key)
        if problem is not None:
            self.refuse(key, problem)
            return None
        return record

    def store(self, key: str, device: str, variant: str, timings: dict[str, float]) -> None:
        path = self.path(key)
        if path is None:
            return
        record = {"key": key, "device": device, "variant": variant, "timings": timings,
                  "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(record, indent=1))
            os.replace(tmp, path)
        except OSError as exc:
            if path in self.refused:  # its warning already says why (a directory in the file's place)
                with contextlib.suppress(OSError):
                    tmp.unlink(missing_ok=True)
                return
            self._warn(f"the decision cache {self.folder} is not writable ({exc.strerror or exc}): each start "
                       f"times the candidates again; set {ENV} to a writable folder, or to 'off'")
