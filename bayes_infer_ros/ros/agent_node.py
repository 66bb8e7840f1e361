"""``agent_node``: discrete Bayesian state inference (FPI / VMP / MMP) as a ROS 2 node.

Two modes, one implementation (:class:`_AgentCore`):
- lifecycle (default): ``configure`` loads and validates the model, resolves the variant and compiles the
  engine; ``activate`` starts the tick; ``deactivate`` stops it; ``cleanup`` drops everything.
  ``autostart:=true`` (what the launch file passes) walks configure -> activate at start.
- plain (``--plain`` on the command line): a plain rclpy Node that configures and activates itself at
  start and exits with status 1 when the model is refused.

Topics (relative to the node's namespace; every QoS but /diagnostics' can be changed with ``qos_overrides``):
  in   observations/<modality>   bayes_infer_ros/CategoricalObservation   SensorDataQoS (best effort), depth param
  in   controls                  bayes_infer_ros/Controls (stamped, one control per factor)   reliable, depth 100
  out  beliefs                   bayes_infer_ros/Beliefs                  reliable, transient local, depth param (1)
  out  beliefs/<factor>          bayes_infer_ros/Belief                   reliable, transient local, depth param (1)
  out  /diagnostics              diagnostic_msgs/DiagnosticArray          reliable, depth 10
Services (private: under the node's name, remappable): ~/reset (std_srvs/Trigger),
~/switch_variant (bayes_infer_ros/SwitchVariant), plus the lifecycle services.

Threading: a SingleThreadedExecutor serves subscriptions, the tick, reset, diagnostics and parameter callbacks
(one at a time, as a mutually exclusive group would). ``switch_variant`` waits for the build, so it is served by
a hidden companion node in its own thread (``companion.py``; rclpy's MultiThreadedExecutor is avoided on purpose,
see there). Builds (autotuner, engine build, compile with tick-shaped inputs) run in a daemon worker thread
(``builder.py``: coalesced, cancelled between phases, nothing installed after cleanup / destroy_node); the
finished engine is swapped in under ``_tick_lock`` (held by each tick), so a swap waits for at most one tick and a
tick never waits for a compile. A failed build keeps the running engine and puts the parameters back. Every
executor callback is wrapped (``_guarded``): an exception is logged and counted, never raised into the executor.
Observation stamps follow ``admission.py``.
"""
from __future__ import annotations

import os

# Before anything imports jax: do not grab most of the GPU at start (a Jetson shares it with the CPU).
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import functools
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, SetParametersResult
from rclpy.clock import Clock, ClockType, JumpThreshold
from rclpy.duration import Duration
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSPolicyKind, QoSProfile, ReliabilityPolicy
from rclpy.qos_overriding_options import QoSOverridingOptions
from std_srvs.srv import Trigger

from . import admission
from . import conversion as conv
from . import jax_cache, node_help
from .builder import Builder, BuildCancelled, Ticket, check_memory_budget
from .companion import CompanionServices
from .compat import add_parameter_callbacks
from .controls import ControlTimeline, check_controls, fill_window_actions
from .parameters import ENGINE_PARAMETERS, PARAMETERS, allowed_model_keys, validate_change
from bayes_infer_ros.msg import Belief, Beliefs, CategoricalObservation, Controls  # noqa: E402 (after ros/__init__ path fix)
from bayes_infer_ros.srv import SwitchVariant

NODE_NAME = "agent"
AUTO_FALLBACK_VARIANT = "baseline"  # the documented rule when the autotuner is unavailable or fails
SIM_CLOCK_GRACE_S = 3.0  # use_sim_time without a /clock message for this long: diagnostics WARN


@dataclass(frozen=True)
class EngineConfig:
    algorithm: str
    variant: str          # as requested ("auto" allowed)
    num_iter: int
    tau: float
    horizon: int
    autotune_verify_top_k: int = 0  # variant auto: time the autotuner's k best here and keep the fastest


@dataclass
class EngineSlot:
    """A compiled engine and what it was built from. Replaced as a whole (atomic swap)."""

    config: EngineConfig
    variant: str          # resolved (never "auto")
    engine: Any
    compile_s: float
    generation: int
    note: str = ""


@dataclass
class ModalityState:
    name: str
    num_levels: int
    fresh: Optional[np.ndarray] = None      # the newest accepted, not yet used observation (m,)
    fresh_stamp_ns: int = 0
    fresh_arrival: float = 0.0              # perf_counter at callback entry
    last_stamp_ns: int = -1                 # newest accepted header stamp (out-of-order guard)
    received: int = 0
    accepted: int = 0
    superseded: int = 0                     # accepted, then replaced by a newer one before any tick used it
    rejected: dict = field(default_factory=dict)
    rate: conv.RateMeter = field(default_factory=conv.RateMeter)
    last_heard: float = 0.0                 # time.monotonic() of the last accepted message (or of activation / a resume)
    silent: bool = False
    last_accepted: float = 0.0              # time.monotonic() of the last accepted message (0: never)
    last_rejected: float = 0.0              # time.monotonic() of the last refused message (0: never)
    last_reason: str = ""                   # why that one was refused


class _Throttle:
    """Per-key log throttle that says how many events it swallowed (rclpy's throttle is per call site)."""

    def __init__(self, period_s: float = 5.0):
        self.period_s = period_s
        self._last: dict[Any, float] = {}
        self._suppressed: dict[Any, int] = {}

    def __call__(self, key: Any) -> Optional[int]:
        now = time.monotonic()
        if now - self._last.get(key, -1e9) >= self.period_s:
            self._last[key] = now
            return self._suppressed.pop(key, 0)
        self._suppressed[key] = self._suppressed.get(key, 0) + 1
        return None


def _descriptor(spec) -> ParameterDescriptor:
    d = ParameterDescriptor(description=spec.description, read_only=spec.read_only)
    constraints = []
    if spec.choices:
        constraints.append("one of: " + ", ".join(spec.choices))
    if spec.read_only:
        constraints.append(f"read-only: set it in the params file or with `--ros-args -p {spec.name}:=VALUE` "
                           "and restart the node")
    d.additional_constraints = "; ".join(constraints)
    if spec.int_range:
        d.integer_range = [IntegerRange(from_value=spec.int_range[0], to_value=spec.int_range[1], step=1)]
    if spec.float_range:
        d.floating_point_range = [FloatingPointRange(from_value=float(spec.float_range[0]), to_value=float(spec.float_range[1]), step=0.0)]
    return d


def _param_value(value: Any) -> Any:
    """rclpy array parameters come back as array.array / lists: plain lists for the model loader."""
    if isinstance(value, (list, tuple)) or type(value).__name__ == "array":
        return list(value)
    return value


class _AgentCore:
    """Everything except the mode-specific transitions. Mixed into a Node or a LifecycleNode."""

    lifecycle_mode = True

    # ------------------------------------------------------------------------------------------
    # construction: parameters only (so `ros2 param` works while unconfigured)
    # ------------------------------------------------------------------------------------------
    def _core_init(self) -> None:
        self._log = self.get_logger()
        self._throttle = _Throttle(5.0)
        self._state_lock = threading.Lock()     # guards the build generation
        self._tick_lock = threading.RLock()     # held by a tick, reset and an engine swap: one writer at a time
        self._builder: Optional[Builder] = None
        self._build_wanted = False
        self._closed = False                    # destroy_node ran: nothing logs or installs after it
        self._configuring = ""                  # what configure is doing (diagnostics), "" when not configuring
        self._started_mono = time.monotonic()
        self._model = None
        self._slot: Optional[EngineSlot] = None
        self._generation = 0
        self._suppress_rebuild = False
        self._active = False
        self._configured = False
        self._config_error = ""
        self._tick_timer = None
        self._entities: list = []
        self._counters: dict[str, int] = {}
        self._reset_request: Optional[str] = None
        self._build_error = ""

        from rclpy.exceptions import ParameterException

        overrides = dict(getattr(self, "_parameter_overrides", {}) or {})
        for spec in PARAMETERS:
            override = overrides.get(spec.name)
            if override is not None:  # nonsense in the params file / on the command line: say so, use the default
                reason = validate_change(spec.name, override.value, variants=self._variant_names(), has_B=True,
                                         startup=True)
                if reason is not None:
                    self._refuse_startup_value(spec, override, reason)
                    continue
                value = override.value
                if isinstance(spec.default, float) and isinstance(value, int) and not isinstance(value, bool):
                    # `rate_hz: 50` in YAML is an integer; ROS would refuse it for a double parameter
                    self.declare_parameter(spec.name, float(value), _descriptor(spec), ignore_override=True)
                    continue
            try:
                self.declare_parameter(spec.name, spec.default, _descriptor(spec))
            except ParameterException as exc:
                self._refuse_startup_value(spec, override, str(exc))
        self._model_override_names = sorted(n for n in overrides if n.startswith("model."))
        for name in self._model_override_names:
            value = overrides[name].value
            if value is None or (isinstance(value, (list, tuple)) and len(value) == 0):
                continue
            self.declare_parameter(name, value, ParameterDescriptor(
                description="Model structure/tensor (see bayes_infer_ros.model.io); read at configure.", read_only=True))
        known = [s.name for s in PARAMETERS]
        for line in conv.unknown_parameters(overrides.keys(), known):
            self._log.warning(line)
            self._count("unknown_parameters")

        self._deferred_post_set = add_parameter_callbacks(
            self,
            self._guarded(self._on_set_parameters,
                          lambda exc: SetParametersResult(successful=False, reason=f"internal error: {exc}")),
            self._guarded(self._post_set_parameters))
        self._build_trigger = self.create_guard_condition(self._guarded(self._on_build_trigger))
        self._companion = CompanionServices(self)
        # Lives as long as the node (answers "not configured" meanwhile): a lifecycle transition never destroys
        # it under a call that is waiting for a build.
        self._switch_service = self._companion.create_service(
            SwitchVariant, "~/switch_variant", self._guarded_service(self._on_switch_variant, SwitchVariant.Response))
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        period = float(self.get_parameter("diagnostics_period").value)
        self._diag_timer = self.create_timer(period, self._guarded(self._publish_diagnostics),
                                             clock=Clock(clock_type=ClockType.STEADY_TIME))
        self._unknown_topics_warned: set[str] = set()
        self._jump_handle = self.get_clock().create_jump_callback(
            JumpThreshold(min_forward=None, min_backward=Duration(nanoseconds=-1), on_clock_change=False),
            post_callback=self._guarded(self._on_time_jump))

    def _guarded(self, fn: Callable, on_error: Optional[Callable[[Exception], Any]] = None) -> Callable:
        """``fn`` as a callback that never lets an exception reach rclpy's executor: it is logged (throttled per
        callback), counted (``callback_errors``), and ``on_error(exc)`` is returned (None without one)."""

        name = getattr(fn, "__name__", None) or getattr(getattr(fn, "func", None), "__name__", "callback")

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - the executor (and so the process) must survive any callback
                self._count("callback_errors")
                self._warn_throttled(("callback_error", name),
                                     f"{name} failed and was contained: {type(exc).__name__}: {exc}")
                return on_error(exc) if on_error is not None else None

        return wrapper

    def _guarded_service(self, fn: Callable, response_type: Any) -> Callable:
        """A service callback that always answers (``success`` False and the error when it raised)."""

        def on_error(exc: Exception) -> Any:
            response = response_type()
            response.success, response.message = False, f"internal error: {type(exc).__name__}: {exc}"
            return response

        return self._guarded(fn, on_error)

    def _refuse_startup_value(self, spec, override, reason: str) -> None:
        value = getattr(override, "value", override)
        self._log.error(f"parameter '{spec.name}' = {value!r} from the command line / params file refused: "
                        f"{reason.strip()}; using the default {spec.default!r}")
        self._count("rejected_parameters")
        self.declare_parameter(spec.name, spec.default, _descriptor(spec), ignore_override=True)

    @staticmethod
    def _variant_names() -> tuple:
        try:
            from bayes_infer_ros.inference import VARIANTS

            return tuple(VARIANTS)
        except Exception:  # noqa: BLE001 - validated again when the engine is built
            return ("baseline",)

    # ------------------------------------------------------------------------------------------
    # small utilities
    # ------------------------------------------------------------------------------------------
    def _count(self, key: str, n: int = 1) -> None:
        self._counters[key] = self._counters.get(key, 0) + n

    def _p(self, name: str) -> Any:
        return self.get_parameter(name).value

    def _warn_throttled(self, key: Any, message: str) -> None:
        if self._closed:
            return
        swallowed = self._throttle(key)
        if swallowed is not None:
            self._log.warning(message + (f" (+{swallowed} more like it in the last {self._throttle.period_s:g} s)" if swallowed else ""))

    # ------------------------------------------------------------------------------------------
    # configure / activate / deactivate / cleanup (shared by both modes)
    # ------------------------------------------------------------------------------------------
    def _configure(self) -> bool:
        """Load, validate and compile in a worker thread (the file's size limits are in model/limits.py); this
        thread waits for it, publishing diagnostics that say "configuring", and gives up when ROS shuts down."""
        t0 = time.perf_counter()
        outcome: dict[str, Any] = {}
        done = threading.Event()

        def work() -> None:
            try:
                outcome["slot"] = self._load_and_build()
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
                outcome["error"] = exc
            finally:
                done.set()

        self._configuring = "configuring: loading the model"
        self._configure_thread = threading.Thread(target=work, name="configure", daemon=True)
        self._configure_thread.start()
        try:
            while not done.wait(float(self._p("diagnostics_period"))):
                if not self.context.ok():
                    outcome.setdefault("error", RuntimeError("ROS is shutting down"))
                    break
                self._publish_diagnostics()
        finally:
            self._configuring = ""
        if "error" in outcome:
            exc = outcome["error"]
            self._config_error = f"configure failed: {exc}"
            if not self._closed:
                self._log.error(self._config_error)
            self._count("configure_failures")
            self._model = None
            return False
        model = self._model
        self._slot = outcome["slot"]
        self._modalities = [ModalityState(model.modality_name(i), int(m)) for i, m in enumerate(model.num_obs)]
        self._factor_names = [model.factor_name(f) for f in range(model.num_factors)]
        self._state_labels = [[str(x) for x in model.state_label_list(f)] for f in range(model.num_factors)]
        config = self._slot.config
        self._config_error = ""
        self._builder = Builder(self._build_in_worker, self._install_built, self._build_failed)
        layout = self._slot.engine.layout
        self._state_offsets = layout.state_offsets
        self._D_packed = np.concatenate([np.asarray(d, dtype=np.float32) for d in model.D])
        self._num_controls = tuple(int(u) for u in model.num_controls)
        self._control_labels = model.control_labels
        self._window = conv.SequenceWindow(max(config.horizon, 1), model.num_obs, model.num_factors)
        self._controls = ControlTimeline(model.num_factors)
        self._reset_state("configure")
        self._tick_count = 0
        self._tick_stats = conv.LatencyStats()
        self._inference_stats = conv.LatencyStats()
        self._latency_stats = conv.LatencyStats()
        self._overhead_stats = conv.LatencyStats()
        try:
            self._create_entities()
        except Exception as exc:  # noqa: BLE001 - e.g. a qos_overrides value rclpy cannot use
            self._config_error = f"configure failed: topics and services: {exc}"
            self._log.error(self._config_error)
            self._count("configure_failures")
            self._cleanup()
            return False
        self._configured = True
        self._log.info(
            f"configured in {time.perf_counter() - t0:.2f} s: {model.num_modalities} modalities {list(model.modality_names or [])}, "
            f"{model.num_factors} factors {self._factor_names}, algorithm={config.algorithm}, variant={self._slot.variant}"
            f"{' (auto: ' + self._slot.note + ')' if config.variant == 'auto' else ''}, compile {self._slot.compile_s:.2f} s")
        return True

    def _load_and_build(self) -> EngineSlot:
        """configure's work (in its worker thread): JAX set-up, the model, the first engine."""
        self._setup_jax()
        try:
            self._model = self._load_model()
        except Exception as exc:  # noqa: BLE001 - the reason, and what to do about it
            raise RuntimeError(f"{exc} (`bayes-infer model validate FILE` checks a model file; fix it, then configure "
                               "again)") from exc
        self._configuring = "configuring: compiling the engine"
        config = self._config_from_parameters()
        if config.algorithm != "fpi" and self._model.B is None:
            raise ValueError(f"algorithm: {config.algorithm} needs transition tensors B; the model has none (set "
                             "algorithm: fpi, or add B to the model, then configure again)")
        try:
            slot = self._build_slot(config, generation=0)
        except Exception as exc:  # noqa: BLE001
            raise RuntimeError(f"engine build: {exc}") from exc
        self._prune_jax_cache()
        return slot

    def _activate(self) -> None:
        self._active = True
        for mod in self._modalities:
            mod.last_heard = time.monotonic()
        self._make_tick_timer()
        mode = "event-driven" if self._tick_timer is None else f"timer at {self._p('rate_hz'):g} Hz"
        self._log.info(f"active: tick {mode}")

    def _deactivate(self) -> None:
        self._active = False
        if self._tick_timer is not None:
            self.destroy_timer(self._tick_timer)
            self._tick_timer = None

    def _cleanup(self) -> None:
        self._deactivate()
        for entity in self._entities:
            kind, obj = entity
            {"pub": self.destroy_publisher, "sub": self.destroy_subscription, "srv": self.destroy_service,
             "csrv": self._companion.destroy_service,
             "lpub": getattr(self, "destroy_lifecycle_publisher", self.destroy_publisher)}[kind](obj)
        self._entities = []
        if self._builder is not None:
            self._builder.close("the node was cleaned up (lifecycle cleanup) before the new engine was ready")
            self._builder = None
        self._slot = None
        self._model = None
        self._configured = False

    def destroy_node(self) -> None:
        self._closed = True
        builder = getattr(self, "_builder", None)
        if builder is not None:
            builder.close("the node is shutting down")
        companion = getattr(self, "_companion", None)
        if companion is not None:
            companion.close()
        super().destroy_node()

    def build_in_progress(self) -> bool:
        """configure's worker or an engine build is still running (compiling: XLA cannot be interrupted)."""
        configure = getattr(self, "_configure_thread", None)
        if configure is not None and configure.is_alive():
            return True
        builder = getattr(self, "_builder", None)
        return builder is not None and builder.thread_alive and builder.busy

    # ------------------------------------------------------------------------------------------
    # model, jax, engine
    # ------------------------------------------------------------------------------------------
    def _setup_jax(self) -> None:
        import jax

        cache = str(self._p("jax_compilation_cache_dir") or "")
        if cache:
            cache = os.path.expanduser(cache)
            os.makedirs(cache, exist_ok=True)
            jax.config.update("jax_compilation_cache_dir", cache)
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
            self._prune_jax_cache()
        device = self._p("device")
        if device == "auto":
            dev = jax.devices()[0]
        else:
            try:
                dev = jax.devices(device)[0]
            except RuntimeError as exc:
                raise RuntimeError(f"device: {device!r} is not available to JAX ({exc}); "
                                   f"JAX_PLATFORMS={os.environ.get('JAX_PLATFORMS', '')!r}") from None
        jax.config.update("jax_default_device", dev)
        self._device = f"{dev.platform}:{dev.id}"

    def _prune_jax_cache(self) -> None:
        """Keep the compilation cache folder within jax_compilation_cache_max_mb (least recently used out)."""
        cache = str(self._p("jax_compilation_cache_dir") or "")
        if not cache:
            return
        try:
            removed, freed = jax_cache.prune(os.path.expanduser(cache), int(self._p("jax_compilation_cache_max_mb")) * 2**20)
        except OSError as exc:
            self._warn_throttled("jax_cache", f"compilation cache {cache}: could not prune: {exc}")
            return
        if removed:
            self._count("jax_cache_evictions", removed)

    def _load_model(self):
        from bayes_infer_ros.model import load_model, model_from_parameters

        path = str(self._p("model_file") or "")
        if path:
            if self._model_override_names:
                self._log.warning(f"model_file is set: ignoring {len(self._model_override_names)} inline model.* parameters")
            model = load_model(os.path.expanduser(path))
            self._log.info(f"model loaded from {path}")
            return model
        if not self._model_override_names:
            raise ValueError("no model: set model_file or the model.* parameters (see config/agent.yaml)")
        flat = {n: _param_value(self.get_parameter(n).value) for n in self._model_override_names if self.has_parameter(n)}
        model = model_from_parameters(flat)
        allowed = allowed_model_keys([model.factor_name(f) for f in range(model.num_factors)],
                                     [model.modality_name(i) for i in range(model.num_modalities)])
        for name in self._model_override_names:
            if name not in allowed:
                self._log.warning(f"unknown model parameter '{name}' ignored (no such modality/factor field)")
                self._count("unknown_parameters")
        return model

    def _config_from_parameters(self, overrides: Optional[dict] = None) -> EngineConfig:
        values = {n: self._p(n) for n in ENGINE_PARAMETERS}
        values.update(overrides or {})
        return EngineConfig(values["algorithm"], values["variant"], int(values["num_iter"]), float(values["tau"]),
                            int(values["horizon"]), int(values["autotune_verify_top_k"]))

    def _new_engine(self, config: EngineConfig, variant: str):
        from bayes_infer_ros.inference import engine_for_model

        return engine_for_model(self._model, config.algorithm, variant=variant, num_iter=config.num_iter, tau=config.tau)

    def _resolve_variant(self, config: EngineConfig, checkpoint: Callable[[], None] = lambda: None) -> tuple[str, str, Any]:
        """(variant, note, engine already built by the verify step or None)."""
        if config.variant != "auto":
            return config.variant, "", None
        try:
            from bayes_infer_ros.autotune import rank_variants, verify_engines

            k = config.autotune_verify_top_k
            ranked = [v for v, _ in rank_variants(config.algorithm, self._model, horizon=config.horizon,
                                                  num_iter=config.num_iter,
                                                  memory_budget_gb=float(self._p("memory_budget_mb")) / 1024)]
            if not k:
                return ranked[0], f"autotuner chose {ranked[0]}", None

            def build(v: str) -> Any:
                checkpoint()
                return self._new_engine(config, v)

            chosen, engine, timings = verify_engines(config.algorithm, self._model, ranked[:k], horizon=config.horizon,
                                                     build=build)
            checkpoint()
            timed = ", ".join(f"{v} {t * 1e3:.3g} ms" for v, t in timings.items())
            return chosen, f"autotuner chose {chosen}, the fastest of its top {k} timed here ({timed})", engine
        except BuildCancelled:
            raise
        except Exception as exc:  # noqa: BLE001 - documented fallback
            note = f"autotuner unavailable ({type(exc).__name__}: {str(exc)[:120]}); rule: {AUTO_FALLBACK_VARIANT}"
            return AUTO_FALLBACK_VARIANT, note, None

    def _build_slot(self, config: EngineConfig, generation: int,
                    checkpoint: Callable[[], None] = lambda: None) -> EngineSlot:
        """Build and compile (tick-shaped calls, so the tick never traces). Runs in configure or the worker;
        ``checkpoint()`` between the phases raises BuildCancelled once the build is no longer wanted. Every
        variant (a user's choice as well as auto's) is held to memory_budget_mb before anything is allocated."""
        import jax

        variant, note, engine = self._resolve_variant(config, checkpoint)
        check_memory_budget(variant, self._model, float(self._p("memory_budget_mb")))
        checkpoint()
        t0 = time.perf_counter()
        if engine is None:
            engine = self._new_engine(config, variant)
        checkpoint()
        if config.algorithm == "fpi":
            engine.warmup()
        else:
            engine.warmup(T=config.horizon, valid_steps=True)
        checkpoint()
        if self._model.B is not None:  # the empirical-prior prediction of fpi ticks
            D = np.concatenate([np.asarray(d, np.float32) for d in self._model.D])
            zero = np.zeros(self._model.num_factors, np.int32)
            jax.block_until_ready(engine.predict(engine.layout.unpack_states(D), zero))
            if config.algorithm == "fpi":  # the one-dispatch tick: beliefs and the next prior
                jax.block_until_ready(engine.tick(np.zeros(engine.layout.obs_size, np.float32), D, zero))
        return EngineSlot(config, variant, engine, time.perf_counter() - t0, generation, note)

    def _on_build_trigger(self) -> None:
        """Executor callback after the parameter callbacks of one request: one build for the whole request
        (rclpy's set_parameters service sets its parameters one at a time)."""
        if not self._build_wanted or not self._configured or self._builder is None:
            return
        self._build_wanted = False
        config = self._config_from_parameters()
        self._log.info(f"building {config} off the tick path (the active engine keeps ticking)")
        self._count("engine_builds_requested")
        self._builder.request(config)

    def _build_in_worker(self, config: EngineConfig, checkpoint: Callable[[], None]) -> EngineSlot:
        self._count("engine_builds_started")
        with self._state_lock:
            self._generation += 1
            generation = self._generation
        try:
            slot = self._build_slot(config, generation, checkpoint)
        finally:
            self._prune_jax_cache()  # a cancelled or failed build may have compiled, too
        self._count("engine_builds_compiled")
        return slot

    def _install_built(self, slot: EngineSlot, ticket: Ticket) -> None:
        """Called by the builder for the newest request only (never after cleanup or destroy_node)."""
        with self._tick_lock:  # waits for at most the tick in progress, never the other way round
            if self._closed or not self._configured:
                raise BuildCancelled("the node was cleaned up before the new engine was ready")
            self._install(slot)
        self._build_error = ""
        self._log.info(f"compiled {slot.config.algorithm}/{slot.variant}"
                       f"{' (' + slot.note + ')' if slot.note else ''} off the tick path in {slot.compile_s:.2f} s; swapped in")

    def _build_failed(self, ticket: Ticket, exc: BaseException) -> None:
        if self._closed:
            return
        self._build_error = f"{type(exc).__name__}: {exc}"
        self._count("switch_failures")
        self._log.error(f"engine build for {ticket.config} failed, keeping the active engine: {self._build_error}")
        if self._builder is not None and self._builder.latest is ticket:
            self._revert_parameters()

    def _revert_parameters(self) -> None:
        """After a failed build, put the engine parameters back to what the active engine runs."""
        if self._slot is None:
            return
        active = self._slot.config
        back = [Parameter(n, value=getattr(active, n)) for n in ENGINE_PARAMETERS if self._p(n) != getattr(active, n)]
        if back:
            self._suppress_rebuild = True
            try:
                self.set_parameters(back)
                self._flush_post_set()
            finally:
                self._suppress_rebuild = False
            self._log.warning(f"parameters reverted to the active engine's: {[(p.name, p.value) for p in back]}")

    def _install(self, slot: EngineSlot) -> None:
        """The atomic swap (caller holds _tick_lock): the next tick runs the new engine."""
        old = self._slot
        self._slot = slot
        if slot.config.horizon != self._window.horizon:
            self._window = self._window.resized(slot.config.horizon)
        if old is None or old.config.algorithm != slot.config.algorithm:
            self._next_prior = None
        self._count("engine_swaps")

    # ------------------------------------------------------------------------------------------
    # ROS entities
    # ------------------------------------------------------------------------------------------
    def _create_entities(self) -> None:
        depth = int(self._p("observation_qos_depth"))
        # Each profile is a default: qos_overrides.<topic>.publisher|subscription.<policy> in the params file
        # replaces it (rclpy declares those parameters read-only at creation).
        overridable = lambda: QoSOverridingOptions(policy_kinds=(  # noqa: E731 - rclpy's defaults lack durability
            QoSPolicyKind.HISTORY, QoSPolicyKind.DEPTH, QoSPolicyKind.RELIABILITY, QoSPolicyKind.DURABILITY))
        sensor_qos = lambda: QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth,  # noqa: E731
                                        reliability=ReliabilityPolicy.BEST_EFFORT, durability=DurabilityPolicy.VOLATILE)
        # transient local, depth 1 by default: a subscriber that joins late (rviz, a logger) gets the latest beliefs
        out_qos = lambda: QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=int(self._p("beliefs_qos_depth")),  # noqa: E731
                                     reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        make_pub = getattr(self, "create_lifecycle_publisher", None) if self.lifecycle_mode else None
        kind = "lpub" if make_pub else "pub"
        make_pub = make_pub or self.create_publisher
        self._beliefs_pub = make_pub(Beliefs, "beliefs", out_qos(), qos_overriding_options=overridable())
        self._entities.append((kind, self._beliefs_pub))
        self._factor_pubs = []
        for name in self._factor_names:
            pub = make_pub(Belief, f"beliefs/{name}", out_qos(), qos_overriding_options=overridable())
            self._factor_pubs.append(pub)
            self._entities.append((kind, pub))
        # `controls` first: when controls and the observations they precede are ready in the same wait, the
        # executor serves subscriptions in creation order, so an fpi tick they trigger sees the new controls.
        controls_qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100, reliability=ReliabilityPolicy.RELIABLE,
                                  durability=DurabilityPolicy.VOLATILE)
        self._entities.append(("sub", self.create_subscription(Controls, "controls", self._guarded(self._on_controls),
                                                               controls_qos, qos_overriding_options=overridable())))
        for i, mod in enumerate(self._modalities):
            sub = self.create_subscription(CategoricalObservation, f"observations/{mod.name}",
                                           self._guarded(functools.partial(self._on_observation, i)), sensor_qos(),
                                           qos_overriding_options=overridable())
            self._entities.append(("sub", sub))
        self._entities.append(("srv", self.create_service(Trigger, "~/reset",
                                                          self._guarded_service(self._on_reset, Trigger.Response))))
        self._obs_prefix = self.resolve_topic_name("observations") + "/"
        self._legacy_actions_topic = self.resolve_topic_name("actions")
        for line in node_help.unused_qos_overrides(
                getattr(self, "_parameter_overrides", {}) or {},
                published=[self.resolve_topic_name(t) for t in ["beliefs"] + [f"beliefs/{n}" for n in self._factor_names]],
                subscribed=[self.resolve_topic_name(t) for t in ["controls"] + [f"observations/{m.name}"
                                                                               for m in self._modalities]]):
            self._log.warning(line)

    def _make_tick_timer(self) -> None:
        if self._tick_timer is not None:
            self.destroy_timer(self._tick_timer)
            self._tick_timer = None
        rate = float(self._p("rate_hz"))
        if self._active and rate > 0:
            try:
                self._tick_timer = self.create_timer(1.0 / rate, self._guarded(self._on_timer), clock=self.get_clock())
            except (TypeError, ValueError, OverflowError) as exc:  # validate_change keeps rate_hz in range
                self._tick_timer = None
                self._count("callback_errors")
                self._log.error(f"rate_hz {rate:g}: no timer could be made ({exc}); ticking event-driven")

    # ------------------------------------------------------------------------------------------
    # inputs
    # ------------------------------------------------------------------------------------------
    def _reject(self, mod: ModalityState, reason: str, detail: str) -> None:
        mod.last_rejected, mod.last_reason = time.monotonic(), reason
        mod.rejected[reason] = mod.rejected.get(reason, 0) + 1
        self._count(f"rejected.{reason}")
        self._warn_throttled((mod.name, reason), f"observations/{mod.name}: dropped ({reason}): {detail}")

    def _on_observation(self, i: int, msg: CategoricalObservation) -> None:
        arrival = time.perf_counter()
        with self._tick_lock:
            self._observation_locked(i, msg, arrival)

    def _observation_locked(self, i: int, msg: CategoricalObservation, arrival: float) -> None:
        mod = self._modalities[i]
        mod.received += 1
        now = time.monotonic()
        mod.rate.tick(now)
        if not self._active:
            self._count("ignored_inactive")
            return
        self._handle_reset_request()
        check = conv.observation_to_distribution(msg.level, msg.probabilities, mod.num_levels)
        if not check.ok:
            self._reject(mod, check.reason, check.detail)
            return
        decision = admission.admit_stamp(msg.header.stamp.sec, msg.header.stamp.nanosec, last_ns=mod.last_stamp_ns,
                                         now_ns=self.get_clock().now().nanoseconds,
                                         timeout_s=float(self._p("observation_timeout")),
                                         max_future_s=float(self._p("max_future_stamp")))
        if not decision.ok:
            self._reject(mod, decision.reason, decision.detail)
            return
        stamp = decision.stamp_ns
        if decision.unstamped:
            self._count("unstamped")
        else:
            mod.last_stamp_ns = stamp
        # Only a valid observation counts as hearing from the modality: a sender of refused messages goes silent.
        if self._active and all(self._is_silent(m) for m in self._modalities):
            # Every input was quiet (start, a paused bag): wait up to observation_timeout for each modality
            # again instead of ticking on whichever message happens to arrive first.
            for m in self._modalities:
                m.last_heard = now
        mod.last_heard = mod.last_accepted = now
        if mod.silent:
            mod.silent = False
            self._log.info(f"observations/{mod.name}: receiving again")
        if check.renormalized:
            self._count("renormalized")
            self._warn_throttled((mod.name, "renormalized"), f"observations/{mod.name}: {check.detail}")
        if mod.fresh is not None:
            mod.superseded += 1
            self._count("superseded")
        mod.fresh, mod.fresh_stamp_ns, mod.fresh_arrival = check.distribution, stamp, arrival
        mod.accepted += 1
        if self._tick_timer is None and float(self._p("rate_hz")) == 0.0 and self._event_ready():
            self._tick()

    def _event_ready(self) -> bool:
        any_new = False
        for mod in self._modalities:
            if mod.fresh is not None:
                any_new = True
            elif not self._is_silent(mod):
                return False
        return any_new

    def _is_silent(self, mod: ModalityState) -> bool:
        timeout = float(self._p("observation_timeout"))
        if timeout <= 0:
            return False
        return time.monotonic() - mod.last_heard > timeout

    def _on_controls(self, msg: Controls) -> None:
        if self._model is None:
            return
        control, reason = check_controls(msg.indices, msg.labels, self._num_controls, self._control_labels)
        if control is None:
            self._count("rejected.bad_control")
            self._warn_throttled(("controls", "bad_control"), f"controls: dropped (bad_control): {reason}")
            return
        stamp = conv.stamp_to_ns(msg.header.stamp.sec, msg.header.stamp.nanosec)
        with self._tick_lock:
            self._controls.add(stamp if stamp > 0 else self.get_clock().now().nanoseconds, control)
        self._count("controls")

    def _on_time_jump(self, jump) -> None:
        # Runs in whichever thread moved the clock (the /clock subscription): only flag it; the next
        # observation or tick resets under the tick lock. Switching sim time on/off is not a jump back.
        delta_ns = jump.delta.nanoseconds
        if delta_ns < 0 and self._configured:
            self._reset_request = f"clock jumped backwards by {-delta_ns * 1e-9:.3f} s"

    def _handle_reset_request(self) -> None:
        reason, self._reset_request = self._reset_request, None
        if reason and self._configured:
            self._log.warning(f"{reason} (a looping bag or a restarted simulator?): resetting beliefs to D")
            self._count("time_jump_resets")
            self._reset_state(reason)
            self._controls.clear()  # stamped on the old time line

    def _reset_state(self, reason: str) -> None:
        self._window.clear()
        self._last_qs: Optional[np.ndarray] = None
        self._next_prior: Optional[tuple] = None
        self._last_tick_clock_ns: Optional[int] = None
        for mod in self._modalities:
            mod.fresh = None
            mod.last_stamp_ns = -1

    # ------------------------------------------------------------------------------------------
    # the tick
    # ------------------------------------------------------------------------------------------
    def _on_timer(self) -> None:
        self._tick()

    def _sim_time_without_clock(self) -> bool:
        """use_sim_time is on and no /clock message came for SIM_CLOCK_GRACE_S since start/activation."""
        return (bool(self.get_parameter("use_sim_time").value) and self.get_clock().now().nanoseconds == 0
                and time.monotonic() - self._started_mono > SIM_CLOCK_GRACE_S)

    def _prior_for(self, action: np.ndarray) -> np.ndarray:
        if self._last_qs is None:
            return self._D_packed
        key = tuple(int(a) for a in action)
        if self._next_prior is not None and self._next_prior[0] == key and self._next_prior[1] is self._slot:
            return self._next_prior[2]
        return self._predict(action)

    def _predict(self, action: np.ndarray) -> np.ndarray:
        engine = self._slot.engine
        q = engine.layout.unpack_states(self._last_qs)
        prior = np.concatenate([np.asarray(x, dtype=np.float32) for x in engine.predict(q, action)])
        self._next_prior = (tuple(int(a) for a in action), self._slot, prior)
        return prior

    def _tick(self) -> None:
        with self._tick_lock:
            self._tick_locked()

    def _tick_locked(self) -> None:
        t_start = time.perf_counter()
        if not self._active:
            return
        self._handle_reset_request()
        slot = self._slot
        now_ns = self.get_clock().now().nanoseconds
        if self._last_tick_clock_ns is not None and now_ns < self._last_tick_clock_ns:
            self._reset_request = f"clock jumped backwards by {(self._last_tick_clock_ns - now_ns) * 1e-9:.3f} s"
            self._handle_reset_request()
        self._last_tick_clock_ns = now_ns
        used = [m for m in self._modalities if m.fresh is not None]
        if not used and not self._p("tick_without_observations"):
            self._count("idle_ticks")
            return
        for mod in self._modalities:
            if mod.fresh is None and self._is_silent(mod) and not mod.silent:
                mod.silent = True
                self._log.warning(f"observations/{mod.name}: silent for more than observation_timeout "
                                  f"({self._p('observation_timeout'):g} s); ticking without it (no evidence)")
        row = np.concatenate([m.fresh if m.fresh is not None else conv.uniform(m.num_levels) for m in self._modalities])
        newest_stamp = max((m.fresh_stamp_ns for m in used), default=0)
        last_arrival = max((m.fresh_arrival for m in used), default=None)
        for mod in used:
            mod.fresh = None
        step_stamp = newest_stamp if newest_stamp > 0 else now_ns
        action = self._controls.at(step_stamp)  # the controls in effect just before this step
        first_step = self._window.valid_steps == 0
        self._window.push(row, None if first_step else action, step_stamp)
        if slot.config.algorithm != "fpi":  # controls that arrived late land on their own transitions
            fill_window_actions(self._window.actions, self._window.stamps, self._window.valid_steps, self._controls)
            self._controls.forget_before(int(self._window.stamps[self._window.horizon - self._window.valid_steps]))
        else:
            self._controls.forget_before(step_stamp)

        engine = slot.engine
        t_inf = time.perf_counter()
        try:
            if slot.config.algorithm == "fpi":
                prior = self._D_packed if first_step or self._last_qs is None else self._prior_for(action)
                if self._model.B is not None:  # one dispatch: beliefs and next tick's prior (newest controls)
                    upcoming = self._controls.latest()
                    q, nxt = engine.tick(row, prior, upcoming)
                    posterior = np.asarray(q, dtype=np.float32)
                    self._next_prior = (tuple(int(a) for a in upcoming), slot, np.asarray(nxt, dtype=np.float32))
                else:
                    posterior = np.asarray(engine.run_packed(row, prior), dtype=np.float32)
            else:
                out = engine.run_packed(self._window.obs, self._D_packed, self._window.actions,
                                        valid_steps=self._window.valid_steps)
                posterior = np.asarray(out, dtype=np.float32)[-1]
        except Exception as exc:  # noqa: BLE001 - a tick must never take the node down
            self._count("tick_errors")
            self._warn_throttled("tick_error", f"tick failed: {type(exc).__name__}: {exc}")
            return
        inference_s = time.perf_counter() - t_inf
        self._last_qs = posterior
        self._tick_count += 1
        self._publish(posterior, step_stamp, slot, inference_s)
        t_done = time.perf_counter()
        self._inference_stats.add(inference_s)
        self._tick_stats.add(t_done - t_start)
        if last_arrival is not None:
            self._latency_stats.add(t_done - last_arrival)
            self._overhead_stats.add(max(t_done - last_arrival - inference_s, 0.0))

    def _publish(self, posterior: np.ndarray, stamp_ns: int, slot: EngineSlot, inference_s: float) -> None:
        msg = Beliefs()
        msg.header.stamp.sec, msg.header.stamp.nanosec = admission.output_stamp(stamp_ns)
        msg.tick = self._tick_count
        msg.algorithm = slot.config.algorithm
        msg.variant = slot.variant
        msg.inference_ms = float(inference_s * 1e3)
        factors = []
        for f, probs in enumerate(conv.beliefs_from_packed(posterior, self._state_offsets)):
            b = Belief()
            b.header = msg.header
            b.name = self._factor_names[f]
            b.state_labels = self._state_labels[f]  # strings: model/limits.py and _configure make sure
            b.probabilities = probs.tolist()
            index, entropy = conv.belief_summary(probs)
            b.most_likely_index = index
            b.most_likely_label = self._state_labels[f][index]
            b.entropy = entropy
            factors.append(b)
            self._factor_pubs[f].publish(b)
        msg.factors = factors
        self._beliefs_pub.publish(msg)

    # ------------------------------------------------------------------------------------------
    # services
    # ------------------------------------------------------------------------------------------
    def _on_reset(self, request, response):
        if not self._configured:
            response.success, response.message = False, node_help.not_configured(self)
            return response
        with self._tick_lock:
            self._reset_state("reset service")
        self._count("resets")
        response.success = True
        response.message = "beliefs reset to D; VMP/MMP window cleared"
        self._log.info(response.message)
        return response

    def _on_switch_variant(self, request, response):
        response.algorithm = self._p("algorithm")
        response.variant = self._p("variant")
        if not self._configured:
            response.success, response.message = False, node_help.not_configured(self)
            return response
        params = []
        if request.algorithm:
            params.append(Parameter("algorithm", value=request.algorithm))
        if request.variant:
            params.append(Parameter("variant", value=request.variant))
        if not params:
            response.success, response.message = True, "nothing to change"
            return response
        builder = self._builder
        if builder is None:
            response.success, response.message = False, "not configured"
            return response
        before = builder.counts["requested"]
        result = self.set_parameters_atomically(params)
        self._flush_post_set()
        if not result.successful:
            response.success, response.message = False, result.reason
            return response
        # the executor turns the change into one build request (_on_build_trigger); wait for it, then for the build
        ticket = builder.wait_request_after(before, timeout=30.0)
        try:
            if ticket is None:
                raise BuildCancelled("the node was cleaned up before the build was requested" if not self._configured
                                     else "no build was requested within 30 s (is the node's executor blocked?)")
            slot = ticket.wait(timeout=300.0, abort=lambda: self._closed)
        except BuildCancelled as exc:
            response.success, response.message = False, f"build cancelled: {exc}"
            return response
        except Exception as exc:  # noqa: BLE001
            response.success, response.message = False, f"build failed, previous engine kept: {exc}"
            return response
        response.success = True
        response.algorithm, response.variant = slot.config.algorithm, slot.variant
        response.message = (f"active: {slot.config.algorithm}/{slot.variant}{' (' + slot.note + ')' if slot.note else ''}; "
                            f"compiled off the tick path in {slot.compile_s:.2f} s")
        return response

    # ------------------------------------------------------------------------------------------
    # parameters
    # ------------------------------------------------------------------------------------------
    def _on_set_parameters(self, params: list[Parameter]) -> SetParametersResult:
        batch = {p.name: p.value for p in params}
        has_B = self._model.B is not None if self._model is not None else True
        for p in params:
            reason = validate_change(p.name, p.value, variants=self._variant_names(), has_B=has_B, pending=batch)
            if reason is None and p.name == "variant" and p.value != "auto" and self._model is not None:
                budget = float(batch.get("memory_budget_mb", self._p("memory_budget_mb")))
                try:
                    check_memory_budget(p.value, self._model, budget)
                except ValueError as exc:
                    reason = str(exc)
            if reason is not None:
                self._count("rejected_parameters")
                self._log.warning(f"parameter change refused: {reason}")
                return SetParametersResult(successful=False, reason=reason)
        return SetParametersResult(successful=True)

    def _flush_post_set(self) -> None:
        """After the node's own set_parameters: its post-set work is done on return, on every distro."""
        if self._deferred_post_set is not None:
            self._deferred_post_set.flush()

    def _post_set_parameters(self, params: list[Parameter]) -> None:
        names = {p.name for p in params}
        if "rate_hz" in names and self._active:
            self._make_tick_timer()
            mode = "event-driven" if self._tick_timer is None else f"timer at {self._p('rate_hz'):g} Hz"
            self._log.info(f"tick: {mode}")
        if names & set(ENGINE_PARAMETERS) and self._configured and not self._suppress_rebuild:
            self._build_wanted = True
            self._build_trigger.trigger()

    # ------------------------------------------------------------------------------------------
    # diagnostics
    # ------------------------------------------------------------------------------------------
    def _publish_diagnostics(self) -> None:
        status = DiagnosticStatus()
        status.name = f"{self.get_name()}: inference"
        status.hardware_id = self.get_fully_qualified_name()
        values: dict[str, Any] = {}
        level, message = DiagnosticStatus.OK, "ok"
        if not self._configured:
            level = DiagnosticStatus.ERROR if self._config_error and not self._configuring else DiagnosticStatus.WARN
            message = self._configuring or self._config_error or node_help.unconfigured_hint(self.get_fully_qualified_name())
        else:
            now = time.monotonic()
            rate = float(self._p("rate_hz"))
            period_ms = 1e3 / rate if rate > 0 else float("nan")
            slot = self._slot
            values.update({
                "active": self._active, "device": self._device,
                "algorithm": slot.config.algorithm, "variant": slot.variant,
                "variant_requested": slot.config.variant, "variant_note": slot.note,
                "engine_compile_s": f"{slot.compile_s:.3f}", "switch_pending": self._builder is not None and self._builder.busy,
                "last_build_error": self._build_error,
                "ticks": self._tick_count, "tick_period_ms": f"{period_ms:.3f}",
                "tick_duration_ms_median": f"{self._tick_stats.percentile_ms(50):.3f}",
                "tick_duration_ms_p99": f"{self._tick_stats.percentile_ms(99):.3f}",
                "tick_duration_ms_max": f"{self._tick_stats.maximum * 1e3:.3f}",
                "inference_ms_median": f"{self._inference_stats.percentile_ms(50):.3f}",
                "latency_ms_median": f"{self._latency_stats.percentile_ms(50):.3f}",
                "latency_ms_p99": f"{self._latency_stats.percentile_ms(99):.3f}",
                "overhead_ms_median": f"{self._overhead_stats.percentile_ms(50):.3f}",
                "overhead_ms_p99": f"{self._overhead_stats.percentile_ms(99):.3f}",
                "overhead_samples": self._overhead_stats.count,
            })
            silent = []
            for mod in self._modalities:
                if self._active and self._is_silent(mod):
                    silent.append(mod.name)
                    if not mod.silent:
                        mod.silent = True
                        what = "no message yet" if mod.received == 0 else "no message"
                        self._log.warning(f"observations/{mod.name}: silent ({what} for more than observation_timeout "
                                          f"{self._p('observation_timeout'):g} s); ticks go on without it (no evidence)")
                values[f"input.{mod.name}.rate_hz"] = f"{mod.rate.rate(now):.2f}"
                values[f"input.{mod.name}.received"] = mod.received
                values[f"input.{mod.name}.accepted"] = mod.accepted
                values[f"input.{mod.name}.superseded"] = mod.superseded
                values[f"input.{mod.name}.pending"] = int(mod.fresh is not None)  # accepted, waiting for a tick
                values[f"input.{mod.name}.rejected"] = sum(mod.rejected.values())
            values.update({k: v for k, v in sorted(self._counters.items())})
            dropped = sum(v for k, v in self._counters.items() if k.startswith("rejected."))
            values["dropped_total"] = dropped
            rejecting = {m.name: m.last_reason for m in self._modalities
                         if self._active and admission.being_rejected(now, m.last_rejected, m.last_accepted)}
            values["rejecting"] = ", ".join(f"{k} ({v})" for k, v in rejecting.items())
            if self._active and self._sim_time_without_clock():
                level, message = DiagnosticStatus.WARN, ("use_sim_time is true but no /clock message has arrived: "
                                                         "the node clock stands at 0 (no timer ticks)")
            elif self._active and rate > 0 and self._tick_stats.count and self._tick_stats.percentile_ms(99) > period_ms:
                level, message = DiagnosticStatus.WARN, f"tick p99 {self._tick_stats.percentile_ms(99):.2f} ms > period {period_ms:.2f} ms"
            elif rejecting:
                level, message = DiagnosticStatus.WARN, "rejecting input: " + values["rejecting"]
            elif silent:
                level, message = DiagnosticStatus.WARN, f"silent modalities: {silent}"
            elif self._build_error:
                level, message = DiagnosticStatus.WARN, f"last engine build failed: {self._build_error[:200]}"
            elif not self._active:
                message = "inactive"
            self._scan_unknown_topics()
            if self._active and self._tick_timer is None and float(self._p("rate_hz")) == 0.0:
                with self._tick_lock:  # event mode: a modality just went silent while others wait with new data
                    if self._event_ready():
                        self._tick()
        status.level, status.message = level, message
        status.values = [KeyValue(key=str(k), value=str(v)) for k, v in values.items()]
        arr = DiagnosticArray()
        arr.header.stamp = self.get_clock().now().to_msg()
        arr.status = [status]
        self._diag_pub.publish(arr)

    def _scan_unknown_topics(self) -> None:
        known = {self._obs_prefix + m.name for m in self._modalities}
        for name, _types in self.get_topic_names_and_types():
            if name == self._legacy_actions_topic and name not in self._unknown_topics_warned \
                    and self.count_publishers(name) > 0:
                self._unknown_topics_warned.add(name)
                self._log.warning(f"{name} has a publisher, but this node no longer reads it: publish "
                                  f"bayes_infer_ros/msg/Controls (stamped) on {self.resolve_topic_name('controls')}")
            if name.startswith(self._obs_prefix) and name not in known and name not in self._unknown_topics_warned:
                self._unknown_topics_warned.add(name)
                self._count("unknown_modality_topics")
                self._log.warning(f"{name}: published but the model has no such modality "
                                  f"(modalities: {[m.name for m in self._modalities]}); ignored")


class AgentLifecycleNode(_AgentCore, LifecycleNode):
    lifecycle_mode = True

    def __init__(self, **kwargs: Any):
        super().__init__(NODE_NAME, **kwargs)
        self._core_init()

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        return TransitionCallbackReturn.SUCCESS if self._configure() else TransitionCallbackReturn.FAILURE

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._activate()
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._deactivate()
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._cleanup()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        if self._configured:
            self._cleanup()
        return TransitionCallbackReturn.SUCCESS


class AgentNode(_AgentCore, Node):
    """Plain-node mode: configures and activates itself; raises RuntimeError when the model is refused."""

    lifecycle_mode = False

    def __init__(self, **kwargs: Any):
        super().__init__(NODE_NAME, **kwargs)
        self._core_init()
        if not self._configure():
            self.destroy_node()
            raise RuntimeError(self._config_error)
        self._activate()


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point (scripts/agent_node). ``argv`` with or without the program name; ``--plain``: plain-node mode;
    everything after ``--ros-args`` goes to rclpy."""
    argv = list(sys.argv if argv is None else argv)
    if not argv or argv[0].startswith("-"):  # called as main(argv[1:]) (bayes-infer CLI convention)
        argv = ["agent_node"] + argv
    ours = argv[1:argv.index("--ros-args")] if "--ros-args" in argv else argv[1:]
    if "-h" in ours or "--help" in ours:
        print(node_help.usage(PARAMETERS))
        return 0
    plain = "--plain" in argv
    argv = [a for a in argv if a != "--plain"]
    try:
        rclpy.init(args=argv)
    except Exception as exc:  # noqa: BLE001 - e.g. a params file rcl cannot parse (mixed int/float lists)
        print(f"[FATAL] [{NODE_NAME}]: ROS could not start with these arguments (is every params file valid? "
              f"lists must not mix integers and floats: write 1.0, not 1): {exc}", file=sys.stderr)
        return 2
    node = None
    try:
        try:
            node = AgentNode() if plain else AgentLifecycleNode()
        except RuntimeError as exc:
            rclpy.logging.get_logger(NODE_NAME).fatal(str(exc))
            return 1
        if not plain and node.get_parameter("autostart").value:
            if node.trigger_configure() == TransitionCallbackReturn.SUCCESS:
                node.trigger_activate()
        elif not plain:
            node.get_logger().info(node_help.unconfigured_hint(node.get_fully_qualified_name()))
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        # plain mode configures in its constructor: a SIGINT there leaves no node, only configure's thread
        abandon = any(t.name == "configure" and t.is_alive() for t in threading.enumerate())
        if node is not None:
            abandon = abandon or node.build_in_progress()
            node.destroy_node()
        if rclpy.ok():
            rclpy.try_shutdown()
    if abandon:
        # An engine build is still compiling in its daemon thread (XLA cannot be interrupted): exit now rather
        # than let interpreter finalisation race the compiler.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
