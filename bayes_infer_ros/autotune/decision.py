"""The one decision: which device and variant run a model, with its engine and the reason. Used by the node
(``node/builder.py``), ``select_variant`` and the benchmarks.

    decision = decide(model, EngineConfig("fpi"), MemoryBudget.from_mib(2048, "memory_budget_mb"))
    decision.device, decision.variant, decision.engine, decision.reason   # "cpu:0", "fused_numba", <Engine>, "..."

The policy, in order:

1. **Devices.** ``config.device`` ("auto" | "cpu" | "gpu") names the devices allowed; a GPU must pass the self-test
   (``devices.find_devices``). ``auto`` without a working GPU runs on the CPU and says why.
2. **Candidates** are (device, variant) pairs. A variant given by name is a candidate on every allowed device it
   runs on (``inference.variant_devices``: fused_numba only on the host CPU, JAX variants anywhere). ``variant:
   auto`` takes, per device, the autotuner's ranking of that device's model (``select.rank_variants``; a device
   without a trained model of its own uses the CPU's portable model), held to the memory budget and the size guard,
   and, when the verify step runs, after the device's native single-dispatch engines that its model was not
   trained on: an untrained candidate runs only once it was timed here.
3. **Verify** (``verify_top_k = k > 0``): the first k candidates of each device and ``baseline`` on the first
   device are built and timed here, round-robin, on the call the node makes per tick (``select.engine_call``); the
   fastest runs, so the answer is never slower than baseline. The verified answer is kept on disk
   (``decision_cache``) and reused, without timing, while the model's structure, the settings, the devices, the
   machine and the versions stay the same. ``k = 0``: the first candidate of the first device, in milliseconds.
4. **Fallback.** Where the autotuner fails (no model, a broken file) the rule is ``baseline`` on the first device.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

import jax

from .. import inference
from ..inference import Engine, VariantUnsupported, variant_devices
from ..inference.registry import NATIVE_VARIANTS
from . import devices as device_lookup
from .budget import ITEMSIZE, MemoryBudget
from .decision_cache import DecisionCache
from .features import size_estimates
from .select import FALLBACK, engine_call, model_variants, rank_variants
from .timing import time_round_robin

#: The verify step's round-robin: at most this many rounds, stopping after this many seconds of timing.
VERIFY_ROUNDS = 40
VERIFY_MAX_TIME_S = 1.0


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


def _native_candidates(platform: str, known: Sequence[str]) -> list[str]:
    """The single-dispatch engines of ``platform`` that can be built here and that the ranking does not know."""
    return [v for v, cls in NATIVE_VARIANTS.items() if cls.device == platform and cls.available() and v not in known]


def candidates(model: Any, config: EngineConfig, budget: MemoryBudget, platforms: Sequence[str],
               model_dir: Any = None, untrained: bool = False, native_only: Sequence[str] = ()) -> list[Candidate]:
    """Every (device, variant) candidate for ``config``, best first within each device, devices in order;
    ``untrained``: also each device's native engines its ranking model does not know (first); ``native_only``:
    platforms where JAX has no device (numba's CUDA target only)."""
    out: list[Candidate] = []

    def runs(p: str, v: str) -> bool:
        return p in variant_devices(v) and (p not in native_only or v in NATIVE_VARIANTS)

    if config.variant != "auto":
        runs_on = variant_devices(config.variant)
        out = [Candidate(p, config.variant) for p in platforms if runs(p, config.variant)]
        if not out:
            raise VariantUnsupported(f"variant {config.variant} runs on {' or '.join(runs_on)}; device: "
                                     f"{config.device} allows {' and '.join(platforms) or 'no device here'}")
        budget.check(config.variant, model)
        return out
    est = size_estimates(model)
    for p in platforms:
        ranked = [v for v, _ in rank_variants(config.algorithm, model, config.horizon, config.num_iter, backend=p,
                                              memory_budget=budget, itemsize=ITEMSIZE, model_dir=model_dir)]
        natives = _native_candidates(p, model_variants(config.algorithm, p, model_dir)) if untrained else []
        names = [v for v in natives + ranked if runs(p, v) and budget.fits(v, model, ITEMSIZE, est)]
        out += [Candidate(p, v) for v in dict.fromkeys(names)]
    return out


def verify_engines(calls_of: Mapping[str, Callable[[], Engine]], algorithm: str, horizon: int,
                   checkpoint: Callable[[], None] = _no_checkpoint, errors: Optional[dict[str, str]] = None,
                   ) -> tuple[Optional[str], Optional[Engine], dict[str, float]]:
    """Build each candidate (``calls_of[name]()`` returns its engine), run it once, and time it here, round-robin:
    (fastest name, its engine, {name: seconds}). Seconds are ``timing.time_round_robin``'s statistic of the call the
    node makes per tick (``select.engine_call``). A candidate that fails to build or to run (it refuses the model,
    runs out of memory, its kernels do not compile for this device) is timed as inf, and ``errors[name]`` says why;
    none running gives (None, None, timings). ``checkpoint()`` runs before each build (it may raise to abandon)."""
    engines: dict[str, Engine] = {}
    calls: dict[str, Callable[[], Any]] = {}
    timings: dict[str, float] = {}
    for name, build in calls_of.items():
        checkpoint()
        try:
            engines[name] = build()
            calls[name] = engine_call(engines[name], algorithm, horizon)
            calls[name]()  # compiles: a device without code for this kernel fails here, not in the timing
        except Exception as exc:  # noqa: BLE001 - any candidate that cannot run here is out, with its reason
            calls.pop(name, None)
            timings[name] = float("inf")
            if errors is not None:
                errors[name] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}"
    for name, t in time_round_robin(calls, rounds=VERIFY_ROUNDS, max_time_s=VERIFY_MAX_TIME_S).items():
        timings[name] = t.time_s
    timings = {name: timings[name] for name in calls_of}
    if not calls:
        return None, None, timings
    best = min(calls, key=lambda name: timings[name])
    return best, engines[best], timings


def _cache_parts(model: Any, config: EngineConfig, budget: MemoryBudget, platforms: Sequence[str]) -> dict:
    structure = model.structure if hasattr(model, "structure") else model
    return {"structure": repr(structure), "config": repr(config), "budget": budget.bytes, "platforms": list(platforms)}


def decide(model: Any, config: EngineConfig, budget: MemoryBudget, *, build: bool = True,
           checkpoint: Callable[[], None] = _no_checkpoint, found: Optional[device_lookup.Devices] = None,
           model_dir: Any = None, cache: Optional[DecisionCache] = None) -> Decision:
    """The device, variant and engine for ``model`` under ``config`` and ``budget`` (the policy is the module's).

    build:      False: rank only (no engine, no timing; the verify step needs True)
    checkpoint: called between builds; raising from it (the node's BuildCancelled) abandons the decision
    found:      the devices to consider (default ``devices.find_devices(config.device)``)
    cache:      verified decisions on disk (default: none; the node passes ``DecisionCache.from_environment()``)

    Raises ``DeviceUnavailable`` (device: gpu without a working GPU), ``MemoryBudgetExceeded`` and
    ``VariantUnsupported`` (a named variant that cannot run here); ``variant: auto`` falls back instead.
    """
    found = found if found is not None else device_lookup.find_devices(config.device)
    platforms = list(found.by_platform)
    native_only = [p for p, d in found.by_platform.items() if isinstance(d, device_lookup.NumbaCudaDevice)]
    # where the baseline (a JAX program) can run: the rule's device and the verify step's reference
    jax_platforms = [p for p in platforms if p not in native_only]
    notes = [found.note] if found.note else []
    place = found.by_platform.get

    cache_warnings = len(cache.warnings) if cache is not None else 0  # this decision's: those added from here

    def done(c: Candidate, engine: Optional[Engine], reason: str, timings: Optional[dict] = None) -> Decision:
        reason = "; ".join([reason] + notes)
        warnings = tuple(cache.warnings[cache_warnings:]) if cache is not None else ()
        return Decision(c.platform, c.variant, device_lookup.describe(place(c.platform)), engine, reason, timings or {},
                        warnings)

    def make(c: Candidate) -> Callable[[], Engine]:
        return lambda: build_engine(model, config, c.variant, place(c.platform))

    def build_one(c: Candidate) -> Engine:
        checkpoint()
        return make(c)()

    k = config.autotune_verify_top_k if config.variant == "auto" else len(platforms)
    verify = build and k > 0
    try:
        pool = candidates(model, config, budget, platforms, model_dir, untrained=verify, native_only=native_only)
    except VariantUnsupported:
        raise
    except Exception as exc:  # noqa: BLE001 - the documented fallback of variant: auto
        if config.variant != "auto" or not jax_platforms:
            raise
        c = Candidate(jax_platforms[0], FALLBACK)
        reason = f"autotuner unavailable ({type(exc).__name__}: {str(exc)[:120]}); rule: {FALLBACK}"
        return done(c, build_one(c) if build else None, reason)
    if not pool and jax_platforms:  # nothing fits: the baseline runs every model
        pool = [Candidate(jax_platforms[0], FALLBACK)]
    if not pool:
        raise VariantUnsupported(f"no variant can run this model on {', '.join(platforms)} (numba's CUDA target only)")
    if not verify or len(pool) == 1 and config.variant != "auto":
        c = pool[0]
        what = "autotuner chose" if config.variant == "auto" else "requested"
        return done(c, build_one(c) if build else None, f"{what} {c}")
    shortlist = [c for p in platforms for c in [x for x in pool if x.platform == p][:k]]
    if config.variant == "auto" and jax_platforms and Candidate(jax_platforms[0], FALLBACK) not in shortlist:
        shortlist.append(Candidate(jax_platforms[0], FALLBACK))
    key = DecisionCache.key(_cache_parts(model, config, budget, platforms)) if cache is not None else ""
    record = cache.load(key) if cache is not None else None
    if record is not None:
        c = Candidate(record["device"], record["variant"])
        problem = _record_problem(record, c, shortlist)
        if problem is None:
            checkpoint()
            try:
                engine = make(c)()
            except Exception as exc:  # noqa: BLE001 - a kept choice that does not build here is a miss, not a failure
                problem = f"its choice {c} does not build here ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})"
            else:
                return done(c, engine, f"chose {c}, timed here at {record['created']} ({_format(record['timings'])}; "
                                       "decision cache)")
        cache.refuse(key, problem)
    errors: dict[str, str] = {}
    best, engine, timings = verify_engines({str(c): make(c) for c in shortlist}, config.algorithm, config.horizon,
                                           checkpoint, errors)
    checkpoint()
    failed = "; ".join(f"{name} did not run ({why})" for name, why in errors.items())
    if best is None:
        raise VariantUnsupported(f"no candidate could run: {failed}")
    c = next(x for x in shortlist if str(x) == best)
    if cache is not None:
        cache.store(key, c.platform, c.variant, timings)
    notes.extend([failed] if failed else [])
    return done(c, engine, f"chose {c}, the fastest of {len(shortlist)} timed here ({_format(timings)})", timings)


def _record_problem(record: Mapping[str, Any], chosen: Candidate, shortlist: Sequence[Candidate]) -> Optional[str]:
    """Why a well-formed kept ``record`` (``decision_cache.record_problem`` passed) does not fit this decision's
    ``shortlist`` (None: it does): its choice must be a candidate here, timed, and the fastest of its timings."""
    names = [str(c) for c in shortlist]
    if chosen not in shortlist:
        return f"it names {chosen}, not a candidate here ({', '.join(names)})"
    timings = record["timings"]
    if set(timings) != set(names):
        return f"its timings name {', '.join(sorted(timings)) or 'nothing'}, not this decision's candidates"
    if not timings[str(chosen)] <= min(timings.values()):
        return f"its choice {chosen} is not the fastest of its timings"
    return None


def _format(timings: Mapping[str, float]) -> str:
    return ", ".join(f"{name} {t * 1e3:.3g} ms" for name, t in timings.items())


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
    if building:
        found = device_lookup.Devices({backend: jax.devices(backend)[0]})
    else:
        found = device_lookup.Devices({backend: None})
    if not check_build or verify_top_k:
        return decide(model, config, budget, build=bool(verify_top_k), found=found, model_dir=model_dir).variant
    for c in candidates(model, config, budget, [backend], model_dir):
        try:
            build_engine(model, config, c.variant, found.by_platform[backend])
            return c.variant
        except (MemoryError, ValueError):
            continue
    return FALLBACK
