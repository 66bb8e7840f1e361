"""The one decision: which device and variant run a model. One short pipeline, used by the node (``node/builder.py``
starts, ``node/verification.py`` verifies off the tick path), ``bayes-infer warmup``, ``select_variant`` and the
benchmarks:

    candidates -> decision cache -> start -> verification -> record

    plan = plan_decision(model, config, budget, cache=cache)   # milliseconds, nothing built: what starts, what
                                                               # is verified, what is left out and why
    plan, engine = start_engine(plan, model)                   # the engine that runs at once
    timings, errors = verify_candidates(model, config, plan.timed, found)   # the node: in a child process
    outcome = conclude(plan, timings, errors, cache)           # swap only beyond the noise; kept on disk

``decide`` runs the whole pipeline here, in order.

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
from typing import Any, Callable, Mapping, Optional, Sequence

import jax
import numpy as np

from .. import inference
from ..inference import Engine, VariantUnsupported, variant_devices
from ..inference.registry import NATIVE_VARIANTS
from . import devices as device_lookup
from . import slowdowns
from .budget import ITEMSIZE, MemoryBudget
from .decision_cache import DecisionCache
from .select import FALLBACK, engine_call, infeasible, model_variants, ranking, trained_model
from .timing import CandidateTiming, time_round_robin

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
    """What an engine is built from. ``variant`` and ``device`` may be "auto"."""

    algorithm: str
    variant: str = "auto"
    num_iter: int = 16
    tau: float = 1.0
    horizon: int = 1
    autotune_verify_top_k: int = 3
    device: str = "auto"


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


@dataclass
class Decision:
    """What runs: the candidate's ``platform`` and ``variant``, the ``device`` as ``platform:id`` ("" when nothing
    was placed), its engine (None when the caller asked for no build), a one-line reason, the verify step's seconds
    per candidate (``variant@platform``), and warnings to log once (an unwritable decision cache)."""

    platform: str
    variant: str
    device: str
    engine: Optional[Engine]
    reason: str
    timings: dict[str, float] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


def _no_checkpoint() -> None:
    return None


def build_engine(model: Any, config: EngineConfig, variant: str, device: Optional[jax.Device]) -> Engine:
    """``variant``'s engine for ``model`` with ``config``'s settings, its calls on ``device``."""
    return inference.engine_for_model(model, config.algorithm, variant=variant, num_iter=config.num_iter,
                                      tau=config.tau, device=device)


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


# ---- start ---------------------------------------------------------------------------------------------------------
def start_engine(plan: Plan, model: Any, checkpoint: Callable[[], None] = _no_checkpoint,
                 build: Optional[Callable[[str, Any], Engine]] = None) -> tuple[Plan, Engine]:
    """Build the plan's start (``build(variant, device)``, default :func:`build_engine` with the plan's settings).
    A start that refuses the model (over its own memory limits, a shape it cannot run) gives way to the next
    candidate, which then starts unverified; the returned plan says so."""
    refused: list[tuple[Candidate, str]] = []
    if plan.uncached is not None:  # the decision cache's choice: one that does not build here is a miss
        checkpoint()
        try:
            device = plan.devices.by_platform.get(plan.start.platform)
            return plan, (build(plan.start.variant, device) if build is not None
                          else build_engine(model, plan.config, plan.start.variant, device))
        except Exception as exc:  # noqa: BLE001 - not a failure: the plan without the kept choice runs
            if plan.cache is not None:
                plan.cache.refuse(plan.cache_key, f"its choice {plan.start} does not build here ({type(exc).__name__}: "
                                                  f"{' '.join(str(exc).split())[:120]})")
            return start_engine(plan.uncached, model, checkpoint, build)
    for i, c in enumerate(plan.timed):
        checkpoint()
        try:
            device = plan.devices.by_platform.get(c.platform)
            engine = build(c.variant, device) if build is not None else build_engine(model, plan.config, c.variant,
                                                                                     device)
        except (MemoryError, ValueError) as exc:
            if len(plan.timed) == 1:
                raise  # nothing to fall back to: the build's own error
            refused.append((c, f"refused the model: {type(exc).__name__}: {' '.join(str(exc).split())[:160]}"))
            continue
        if not refused:
            return plan, engine
        rest = plan.timed[i + 1:]
        return dataclasses.replace(plan, start=c, verify=rest, skipped=plan.skipped + tuple(refused),
                                   reason=f"the next candidate: {refused[0][0]} refused the model"), engine
    if refused:
        raise VariantUnsupported("no candidate could be built: " + "; ".join(f"{c} {why}" for c, why in refused))
    raise VariantUnsupported("no candidate to build")  # pragma: no cover - a plan always has a start


# ---- verify ---------------------------------------------------------------------------------------------------------
def verify_candidates(model: Any, config: EngineConfig, timed: Sequence[Candidate], found: device_lookup.Devices,
                      checkpoint: Callable[[], None] = _no_checkpoint, engines: Optional[dict[str, Engine]] = None,
                      ) -> tuple[dict[str, CandidateTiming], dict[str, str]]:
    """Build each candidate, run it once (a kernel that does not compile for this device fails here) and time them
    round-robin on the call the node makes per tick: ({str(candidate): timing}, {str(candidate): why it did not
    run}). ``engines``: engines already built, by ``str(candidate)`` (reused; the ones built here are added).
    ``checkpoint()`` runs before each build (it may raise to abandon)."""
    engines = engines if engines is not None else {}
    calls: dict[str, Callable[[], Any]] = {}
    errors: dict[str, str] = {}
    for c in timed:
        name = str(c)
        checkpoint()
        try:
            if name not in engines:
                engines[name] = build_engine(model, config, c.variant, found.by_platform.get(c.platform))
            calls[name] = engine_call(engines[name], config.algorithm, config.horizon)
            calls[name]()  # compiles: a device without code for this kernel fails here, not in the timing
        except Exception as exc:  # noqa: BLE001 - any candidate that cannot run here is out, with its reason
            calls.pop(name, None)
            engines.pop(name, None)
            errors[name] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}"
    checkpoint()
    return time_round_robin(calls, rounds=VERIFY_ROUNDS, max_time_s=VERIFY_MAX_TIME_S), errors


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


# ---- the whole pipeline here ------------------------------------------------------------------------------------
def decide(model: Any, config: EngineConfig, budget: MemoryBudget, *, build: bool = True,
           checkpoint: Callable[[], None] = _no_checkpoint, found: Optional[device_lookup.Devices] = None,
           model_dir: Any = None, cache: Optional[DecisionCache] = None) -> Decision:
    """The pipeline in this thread: plan, start, verify here, conclude (the policy is the module's).

    build:      False: plan only (no engine, no timing)
    checkpoint: called between builds; raising from it (the node's BuildCancelled) abandons the decision
    found:      the devices to consider (default ``devices.find_devices(config.device)``)
    cache:      verified decisions on disk (default: none)

    Raises as :func:`plan_decision` does.
    """
    cache_warnings = len(cache.warnings) if cache is not None else 0  # this decision's: those added from here
    plan = plan_decision(model, config, budget, found=found, model_dir=model_dir, cache=cache)

    def done(c: Candidate, engine: Optional[Engine], reason: str, timings: Optional[dict] = None) -> Decision:
        warnings = tuple(cache.warnings[cache_warnings:]) if cache is not None else ()
        return Decision(c.platform, c.variant, device_lookup.describe(plan.devices.by_platform.get(c.platform)),
                        engine, reason, timings or {}, warnings)

    if not build:
        return done(plan.start, None, plan.describe())
    plan, engine = start_engine(plan, model, checkpoint)
    if not plan.verify:
        return done(plan.start, engine, plan.describe())
    engines = {str(plan.start): engine}
    timings, errors = verify_candidates(model, config, plan.timed, plan.devices, checkpoint, engines)
    outcome = conclude(plan, timings, errors, cache)
    skipped = "".join(f"; not compiled: {c} ({why})" for c, why in plan.skipped)
    notes = "".join(f"; {n}" for n in plan.notes)
    return done(outcome.run, engines[str(outcome.run)], outcome.reason + skipped + notes,
                {n: t.time_s for n, t in outcome.timings.items()} | {n: float("inf") for n in outcome.errors})


def select_variant(algorithm: str, model: Any, horizon: int = 1, num_iter: int = 16, *,
                   backend: Optional[str] = None, memory_budget: Optional[MemoryBudget] = None,
                   model_dir: Any = None, check_build: bool = False, verify_top_k: int = 0) -> str:
    """The variant predicted (or, with ``verify_top_k``, measured) fastest for ``algorithm`` on ``model``.

    ``backend``: the device platform to choose for (default: JAX's default backend; ranking only, so a platform
    that is not here can be asked about). ``check_build``: build the pick, falling to the next candidate when it
    refuses the model. ``check_build`` and ``verify_top_k`` need a GenerativeModel with arrays and a device of
    ``backend`` here. Never returns a variant that cannot run the model; ``"baseline"`` otherwise.
    """
    backend = backend or jax.default_backend()
    budget = memory_budget or MemoryBudget.from_gib(2.0)
    building = bool(verify_top_k) or check_build
    config = EngineConfig(algorithm, "auto", num_iter, 1.0, horizon, max(int(verify_top_k), 0), backend)
    found = device_lookup.Devices({backend: jax.devices(backend)[0] if building else None})
    if verify_top_k:
        return decide(model, config, budget, found=found, model_dir=model_dir).variant
    if not check_build:
        return plan_decision(model, config, budget, found=found, model_dir=model_dir).start.variant
    # every ranked candidate in order, the untrained engines left out (they run only once verified)
    every = dataclasses.replace(config, autotune_verify_top_k=len(inference.VARIANTS))
    plan = plan_decision(model, every, budget, found=found, model_dir=model_dir)
    untrained = set(_untrained_natives(backend, algorithm, model_dir))
    plan = dataclasses.replace(plan, verify=tuple(c for c in plan.verify if c.variant not in untrained))
    return start_engine(plan, model)[0].start.variant
