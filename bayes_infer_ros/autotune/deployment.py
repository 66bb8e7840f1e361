"""Deployment: the decision of ``decision`` made real. The one place outside ``inference`` that builds engines
(:func:`engine_for`), for the node, ``bayes-infer warmup``, the golden replays and the lab, and the node's policy
inference (:func:`deploy_policy`).

    deployment = deploy(model, config, budget, cache=cache)   # plan, the decision cache, build the start and
                                                              # compile every call a step makes
    deployment.engine                                         # what runs, for ``config.agents`` agents
    job = Verification(model, deployment.plan, on_done).start()   # the verify step, in a child process
    winner = deploy(model, config, budget, pin=Pinned(config, outcome.run, outcome.reason))   # a faster one

The pipeline's other steps build too: :func:`start_engine` (the plan's start, or the next candidate where it
refuses the model), :func:`verify_candidates` (build and time the plan's candidates: the verify step's work) and
:func:`decide` (plan, start, verify and conclude in this thread). :func:`select_variant` answers "which variant"
for the lab and benchmarks.

**Agents.** An engine serves ``config.agents`` agents of one model (1 by default): for b > 1 the model's arrays get a
leading batch axis of one row per agent (one step is one batched call) and the memory budget holds b copies. The
verify step times the call a step makes for all b agents.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import jax
import numpy as np

from .. import inference
from ..inference import Engine, VariantUnsupported
from ..inference.belief_filter import BeliefFilter
from ..inference.native import numba_available
from ..inference.policy import PolicyInference, PolicyPlan
from . import devices as device_lookup
from .decision import (VERIFY_MAX_TIME_S, VERIFY_ROUNDS, Candidate, DecisionCache, EngineConfig, Pinned, Plan,
                       conclude, plan_decision)
from .select import (MemoryBudget, MemoryBudgetExceeded, engine_call, estimated_bytes, format_bytes,
                     untrained_natives)
from .timing import CandidateTiming, time_round_robin


def _no_checkpoint() -> None:
    return None


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


def engine_for(model: Any, config: EngineConfig, variant: str, device: Optional[jax.Device] = None,
               budget: Optional[MemoryBudget] = None) -> Engine:
    """``variant``'s engine for ``model`` with ``config``'s settings, its calls on ``device``: unbatched for one
    agent, with ``config.agents`` identical batch rows for several (the model was validated by its loader: the rows
    are not validated again), held to ``budget`` (MemoryBudgetExceeded naming the estimate and the parameter)."""
    agents = max(int(config.agents), 1)
    if budget is not None and agents > 1:
        est = estimated_bytes(variant, model) * agents
        if est > budget.bytes:
            raise MemoryBudgetExceeded(
                f"variant {variant} for {agents} agents: its arrays are estimated at {format_bytes(est)} while built, "
                f"over {budget.describe()}; raise {budget.name}, or serve fewer agents per node")

    def rows(arrays):  # one agent: the model's own arrays; b agents: b identical rows, not validated again
        if arrays is None or agents == 1:
            return arrays
        return [np.broadcast_to(a, (agents,) + a.shape) for a in arrays]

    return inference.build_inference(config.algorithm, rows(model.A), model.A_dependencies, rows(model.B),
                                     model.B_dependencies, variant=variant, num_iter=config.num_iter, tau=config.tau,
                                     validate=agents == 1, device=device, num_states=model.num_states)


def start_engine(plan: Plan, model: Any, checkpoint: Callable[[], None] = _no_checkpoint,
                 budget: Optional[MemoryBudget] = None) -> tuple[Plan, Engine]:
    """Build the plan's start (:func:`engine_for` with the plan's settings, its agents' rows held to ``budget``). A
    start that refuses the model (over its own memory limits, a shape it cannot run) gives way to the next candidate,
    which then starts unverified; the returned plan says so."""
    refused: list[tuple[Candidate, str]] = []
    if plan.uncached is not None:  # the decision cache's choice: one that does not build here is a miss
        checkpoint()
        try:
            device = plan.devices.by_platform.get(plan.start.platform)
            return plan, engine_for(model, plan.config, plan.start.variant, device, budget)
        except Exception as exc:  # noqa: BLE001 - not a failure: the plan without the kept choice runs
            if plan.cache is not None:
                plan.cache.refuse(plan.cache_key, f"its choice {plan.start} does not build here ({type(exc).__name__}: "
                                                  f"{' '.join(str(exc).split())[:120]})")
            return start_engine(plan.uncached, model, checkpoint, budget)
    for i, c in enumerate(plan.timed):
        checkpoint()
        try:
            device = plan.devices.by_platform.get(c.platform)
            engine = engine_for(model, plan.config, c.variant, device, budget)
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
                engines[name] = engine_for(model, config, c.variant, found.by_platform.get(c.platform))
            calls[name] = engine_call(engines[name], config.algorithm, config.horizon, config.agents, config.evidence)
            calls[name]()  # compiles: a device without code for this kernel fails here, not in the timing
        except Exception as exc:  # noqa: BLE001 - any candidate that cannot run here is out, with its reason
            calls.pop(name, None)
            engines.pop(name, None)
            errors[name] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}"
    checkpoint()
    return time_round_robin(calls, rounds=VERIFY_ROUNDS, max_time_s=VERIFY_MAX_TIME_S), errors


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
    untrained = set(untrained_natives(backend, algorithm, model_dir))
    plan = dataclasses.replace(plan, verify=tuple(c for c in plan.verify if c.variant not in untrained))
    return start_engine(plan, model)[0].start.variant


# ---- one deployment ------------------------------------------------------------------------------------------------
@dataclass
class Deployment:
    """An engine deployed for a model: what runs (``engine``, its ``variant`` and ``device`` as ``platform:id``), the
    settings it was built from (``config``), the decision it came from (``plan``: what its verify step times), why
    (``note``), the seconds from the decision to the compiled calls (``compile_s``) and warnings to log once (an
    unwritable decision cache)."""

    config: EngineConfig
    variant: str
    engine: Engine
    compile_s: float
    note: str = ""
    device: str = ""
    warnings: tuple[str, ...] = field(default=())
    plan: Optional[Plan] = None


def deploy(model: Any, config: EngineConfig, budget: MemoryBudget, *, cache: Optional[DecisionCache] = None,
           pin: Optional[Pinned] = None, checkpoint: Callable[[], None] = _no_checkpoint) -> Deployment:
    """Decide, build the start and compile every call a step makes, and no other (so a step never traces, and a first
    start compiles nothing it will not run): the engine of ``config.agents`` agents (``config.evidence``: the step
    with its evidence: surprise, gates, free energy).
    Its verify step is the caller's (``deployment.plan``). ``checkpoint()`` between the phases raises (the node's
    BuildCancelled) once the deployment is no longer wanted. Every variant (a user's choice as well as auto's) is held
    to ``budget`` before anything is allocated. ``cache``: kept decisions (default: the environment's,
    ``DecisionCache.from_environment``); ``pin``: deploy that candidate."""
    cache = cache if cache is not None else DecisionCache.from_environment()
    cache_warnings = len(cache.warnings)  # this deployment's: those added from here
    t0 = time.perf_counter()
    plan = plan_decision(model, config, budget, cache=cache, pin=pin)
    plan, engine = start_engine(plan, model, checkpoint, budget)
    checkpoint()
    if engine.spec.window:  # the window's program, at its one compiled length
        engine.warmup(T=config.horizon, valid_steps=True)
        checkpoint()
    # the calls a step makes: fpi's step (with its evidence, or without) and the prediction of a prior; vmp / mmp's
    # evidence calls around the window
    BeliefFilter(engine, model.D, config.horizon, has_B=model.B is not None).warm(config.evidence)
    return Deployment(config, plan.start.variant, engine, time.perf_counter() - t0, plan.describe(),
                      device_lookup.describe(plan.devices.by_platform.get(plan.start.platform)),
                      tuple(cache.warnings[cache_warnings:]), plan)


def deploy_policy(plan: PolicyPlan, agents: int = 1, seed: int = 0) -> PolicyInference:
    """A model's policy inference (``inference.policy.plan_policies``' ``plan``) for ``agents`` agents, one call for
    all (beliefs (b, S)), with every call a tick makes compiled: the kernel, and with stochastic selection the noise of
    ``seed``'s stream (``PolicyInference.noise_stream``). fused_numba on the host CPU where numba is installed, else
    one jitted JAX program on the host CPU: the beliefs are on the host, and a call is microseconds of work."""
    backend = "fused_numba" if numba_available() else "jax"
    device = None if backend == "fused_numba" else jax.devices("cpu")[0]
    policy = PolicyInference(plan, backend, batch_size=max(int(agents), 1), device=device)
    uniform = np.concatenate([np.full(n, 1.0 / n, plan.dtype) for n in plan.structure.num_states])
    noise = policy.noise_stream(seed).next() if plan.stochastic else None
    policy(np.tile(uniform, (policy.batch_size, 1)), noise)
    return policy
