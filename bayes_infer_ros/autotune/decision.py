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
  is verified unless it is predicted to lose by a wide margin on this model (``slowdowns``: the most similar
  training models), in which case it is not compiled at all;
- ``variant: auto`` where there is a choice (a GPU, a CPU without numba): the device's ranking model
  (``select.ranking``: classifier, size guard, memory budget). Its first pick starts; its next ``k - 1`` picks, the
  device's native engines it was not trained on (an untrained candidate runs only once verified) and ``baseline``
  are verified.

The first device's start runs at once; the other devices' candidates are verified. Each candidate left out says why.

**Decision cache.** A verified answer is kept on disk (``decision_cache``) and starts without verifying while the
model's structure, the settings, the devices, the machine and the versions stay the same.

**Verify** (``autotune_verify_top_k`` = k > 0): the start and the candidates to verify are built and timed
round-robin (``timing.time_round_robin``) on the call the node makes per tick (``select.engine_call``). A candidate
replaces the start only when it wins beyond the measured noise: faster in at least 3 of 4 rounds, compared round by
round (a preempted round slows whichever ran in it), and by more than 5% in the median round. k = 0: nothing is
verified. A candidate that fails to build or to run drops out with its reason.

**Fallback.** Where the autotuner fails (a broken model file), ``baseline`` on the first device.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from ..inference import VariantUnsupported, variant_devices
from ..inference.registry import NATIVE_VARIANTS
from . import devices as device_lookup
from . import slowdowns
from .budget import ITEMSIZE, MemoryBudget
from .decision_cache import DecisionCache
from .select import FALLBACK, infeasible, model_variants, ranking, trained_model
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


@dataclass(frozen=True)
class Candidate:
    """A variant on a device platform ("cpu" | "gpu")."""

    platform: str
    variant: str

    def __str__(self) -> str:
        return f"{self.variant}@{self.platform}"


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
@dataclass
class _DeviceCandidates:
    """One device's candidates: ``order[0]`` starts when this is the first device, the rest are verified."""

    order: list[str]
    skipped: dict[str, str]
    reason: str


def _untrained_natives(platform: str, algorithm: str, model_dir: Any) -> list[str]:
    """The single-dispatch engines of ``platform`` that can be built here and that its ranking model does not know."""
    known = model_variants(algorithm, platform, model_dir)
    return [v for v, cls in NATIVE_VARIANTS.items() if cls.device == platform and cls.available() and v not in known]


def _device_candidates(model: Any, config: EngineConfig, budget: MemoryBudget, platform: str, native_only: bool,
                       model_dir: Any) -> _DeviceCandidates:
    """``variant: auto``'s candidates on ``platform`` (module docstring), at most k + natives + baseline verified."""
    k = max(int(config.autotune_verify_top_k), 0)
    trained = trained_model(config.algorithm, platform, model_dir)
    natives = _untrained_natives(platform, config.algorithm, model_dir)
    constant = trained.constant if trained is not None else None
    if native_only:  # numba's CUDA target only: its native engines are all that run there
        return _DeviceCandidates(natives, {}, f"the only engines {platform} runs here")
    if constant is not None and not infeasible(constant, model, budget, ITEMSIZE):
        reason = (f"the fastest or tied on all {trained.entry.get('configs', '?')} training models of this install "
                  f"({trained.tag}_meta.json)")
        order, skipped = [constant] + natives, {}
        slowdown = slowdowns.predict(trained.entry.get("slowdowns"), model, FALLBACK)
        if slowdown is not None and slowdown.wide:
            skipped[FALLBACK] = slowdown.describe()
        elif constant != FALLBACK:
            order.append(FALLBACK)
        return _DeviceCandidates(order, skipped, reason)
    rank = ranking(config.algorithm, model, config.horizon, config.num_iter, backend=platform, memory_budget=budget,
                   itemsize=ITEMSIZE, model_dir=model_dir)
    ranked = [v for v, _ in rank.ranked if platform in variant_devices(v)]
    skipped = dict(rank.dropped)
    top = ranked[:max(k, 1)]
    why = f"not among the {k} best predicted by the ranking model" if k else "autotune_verify_top_k is 0: not verified"
    skipped.update({v: why for v in ranked[len(top):] if v != FALLBACK})
    reason = (f"the ranking model's first pick ({trained.tag})" if trained is not None
              else "no ranking model for this device: the rule")
    return _DeviceCandidates(list(dict.fromkeys(top + natives + [FALLBACK])), skipped, reason)


def candidates(model: Any, config: EngineConfig, budget: MemoryBudget, platforms: Sequence[str],
               model_dir: Any = None, native_only: Sequence[str] = ()) -> list[Candidate]:
    """Every (device, variant) candidate for ``config`` that the verify step would time, the start first, devices in
    order (``native_only``: platforms where JAX has no device, numba's CUDA target only). A variant given by name that
    cannot run on any of ``platforms`` raises VariantUnsupported, one over the budget MemoryBudgetExceeded."""
    return list(_candidates(model, config, budget, platforms, model_dir, native_only)[0])


def _candidates(model: Any, config: EngineConfig, budget: MemoryBudget, platforms: Sequence[str], model_dir: Any,
                native_only: Sequence[str]) -> tuple[list[Candidate], list[tuple[Candidate, str]], str]:
    if config.variant != "auto":
        def runs(p: str) -> bool:
            return p in variant_devices(config.variant) and (p not in native_only or config.variant in NATIVE_VARIANTS)

        out = [Candidate(p, config.variant) for p in platforms if runs(p)]
        if not out:
            raise VariantUnsupported(f"variant {config.variant} runs on {' or '.join(variant_devices(config.variant))}"
                                     f"; device: {config.device} allows {' and '.join(platforms) or 'no device here'}")
        budget.check(config.variant, model)
        return out, [], "requested"
    pool: list[Candidate] = []
    skipped: list[tuple[Candidate, str]] = []
    reason = ""
    for p in platforms:
        found = _device_candidates(model, config, budget, p, p in native_only, model_dir)
        pool += [Candidate(p, v) for v in found.order]
        skipped += [(Candidate(p, v), why) for v, why in found.skipped.items()]
        reason = reason or found.reason
    return pool, skipped, reason


def _cache_parts(model: Any, config: EngineConfig, budget: MemoryBudget, platforms: Sequence[str]) -> dict:
    structure = model.structure if hasattr(model, "structure") else model
    return {"structure": repr(structure), "config": repr(config), "budget": budget.bytes, "platforms": list(platforms)}


def plan_decision(model: Any, config: EngineConfig, budget: MemoryBudget, *,
                  found: Optional[device_lookup.Devices] = None, model_dir: Any = None,
                  cache: Optional[DecisionCache] = None) -> Plan:
    """What starts, what is verified and what is left out for ``model`` under ``config`` and ``budget`` (the policy
    is the module's); builds nothing.

    found: the devices to consider (default ``devices.find_devices(config.device)``)
    cache: verified decisions on disk (default: none; the node passes ``DecisionCache.from_environment()``)

    Raises ``DeviceUnavailable`` (device: gpu without a working GPU), ``MemoryBudgetExceeded`` and
    ``VariantUnsupported`` (a named variant that cannot run here); ``variant: auto`` falls back instead.
    """
    found = found if found is not None else device_lookup.find_devices(config.device)
    platforms = list(found.by_platform)
    native_only = [p for p, d in found.by_platform.items() if isinstance(d, device_lookup.NumbaCudaDevice)]
    jax_platforms = [p for p in platforms if p not in native_only]  # where the baseline (a JAX program) runs
    notes = (found.note,) if found.note else ()
    base = Plan(config, Candidate(jax_platforms[0] if jax_platforms else platforms[0], FALLBACK), notes=notes,
                devices=found)
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
    plan = dataclasses.replace(plan, cache_key=DecisionCache.key(_cache_parts(model, config, budget, platforms)),
                               cache=cache)
    record = cache.load(plan.cache_key)  # None for a record that cannot be used: refused, with a warning
    if record is None:
        return plan
    kept = Candidate(record["device"], record["variant"])
    problem = _record_problem(record, kept, plan)
    if problem is not None:
        cache.refuse(plan.cache_key, problem)
        return plan
    return dataclasses.replace(plan, start=kept, verify=(), uncached=plan, reason=(
        f"timed here at {record['created']}: {_format(record['timings'])}; decision cache"))


def _record_problem(record: Mapping[str, Any], chosen: Candidate, plan: Plan) -> Optional[str]:
    """Why a well-formed kept ``record`` (``decision_cache.record_problem`` passed) does not fit ``plan`` (None: it
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
        run = min(winners, key=lambda n: ran[n].median_s)
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


