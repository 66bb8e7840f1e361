"""``agent_node``: discrete Bayesian state inference (FPI / VMP / MMP) as a ROS 2 node.

Two modes, one implementation (:class:`_AgentCore`):
- lifecycle (default): ``configure`` loads and validates the model, resolves the variant and compiles the
  engine; ``activate`` starts the tick; ``deactivate`` stops it; ``cleanup`` drops everything.
  ``autostart:=true`` (what the launch file passes) walks configure -> activate at start.
- plain (:class:`AgentNode`, ``--plain`` on the command line): a plain rclpy Node that configures and activates
  itself at start and raises when the model is refused.
The process's entry point (``agent_node``, ``bayes-infer node``) is ``bayes_infer_ros.cli.node``.

Topics (relative to the node's namespace; every QoS but /diagnostics' can be changed with ``qos_overrides``):
  in   observations/<modality>   bayes_infer_ros/CategoricalObservation   SensorDataQoS (best effort), depth param
       (or adapters.<modality>.topic, of its .type: a sensor message read through an adapter, adapter_inputs.py)
  in   controls                  bayes_infer_ros/Controls (stamped, one control per factor)   reliable, depth 100
  out  beliefs                   bayes_infer_ros/Beliefs                  reliable, transient local, depth param (1)
  out  beliefs/<factor>          bayes_infer_ros/Belief                   reliable, transient local, depth param (1)
  out  /diagnostics              diagnostic_msgs/DiagnosticArray          reliable, depth 10
Services (private: under the node's name, remappable): ~/reset (std_srvs/Trigger),
~/switch_variant (bayes_infer_ros/SwitchVariant), plus the lifecycle services.
Several agents of one model (``agents``): each agent's topics above under ``<agent>/`` plus ``<agent>/reset``,
one batched tick for all (``fleet.py``); ~/reset resets them all.

The node holds parameters, entities and callbacks; the rest lives in modules that say what they hold: the tick's
semantics in ``inference/belief_filter.py``, one configured node's tick in ``tick_loop.py``, the model, the engine,
parameter checks and ``~/switch_variant``'s wait in ``engine_host.py``, engine builds in ``builder.py``, input
admission and silence in ``admission.py``, the /diagnostics status, counters and throttled warnings in
``diagnostics.py``, statistics in ``statistics.py``, the published messages in ``messages.py``, parameter
declaration in ``parameter_declaration.py``.

Threading: a SingleThreadedExecutor serves subscriptions, the tick, reset, diagnostics and parameter callbacks
(one at a time, as a mutually exclusive group would). ``switch_variant`` waits for the build, so it is served by
a hidden companion node in its own thread (``companion.py``; rclpy's MultiThreadedExecutor is avoided on purpose,
see there). Builds (autotuner, engine build, compile with tick-shaped inputs) run in a daemon worker thread
(``builder.Builder``: coalesced, cancelled between phases, nothing installed after cleanup / destroy_node); the
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
import threading
import time
from typing import Any, Sequence

from diagnostic_msgs.msg import DiagnosticArray
from rcl_interfaces.msg import SetParametersResult
from rclpy.clock import Clock, ClockType, JumpThreshold
from rclpy.duration import Duration
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.node import Node
from rclpy.parameter import Parameter
from std_srvs.srv import Trigger

from bayes_infer_ros.inference import VARIANTS

from ..node import admission, help_text as node_help
from . import bond, diagnostics
from .adapter_inputs import AdapterInputs
from ..node.engine_host import EngineHost
from .fleet import Fleet
from ..node.callbacks import CallbackGuard
from .companion import CompanionServices
from .compat import add_parameter_callbacks
from .rclpy_callbacks import contain_entities
from .parameter_declaration import (UntypedOverrides, declare_parameters, model_parameter_values, prefixed_names,
                                    take_overrides)
from ..node.jax_cache import pin_to_cpus
from ..node.parameters import ENGINE_PARAMETERS, parse_agents, parse_cpus, read_at_configure
from .messages import tick_message
from .qos import overridable, profile as qos
from bayes_infer_ros.msg import Belief, Beliefs, CategoricalObservation, Controls  # noqa: E402 (after ros/__init__ path fix)
from bayes_infer_ros.srv import SwitchVariant

NODE_NAME = "agent"


class _AgentCore(UntypedOverrides):
    """Parameters, entities and callbacks of the agent. Mixed into a Node or a LifecycleNode."""

    lifecycle_mode = True

    def _core_init(self) -> None:
        """Parameters only (so `ros2 param` works while unconfigured), plus what lives as long as the node."""
        self._log = self.get_logger()
        self._reporter = diagnostics.Reporter(self._log, lambda: self._closed)
        self._count, self._warn_throttled = self._reporter.count, self._reporter.warn_throttled
        self._guarded = CallbackGuard(self._count, self._warn_throttled)
        self._tick_lock = threading.RLock()     # held by a tick, reset and an engine swap: one writer at a time
        self._build_wanted = self._closed = self._suppress_rebuild = self._active = self._configured = False
        self._config_error, self._started_mono = "", time.monotonic()
        self._reset_request, self._tick_timer, self._entities, self._bond, self._fleet = None, None, [], None, None
        self._host = EngineHost(self._p, lambda: model_parameter_values(self, self._model_override_names), self._log,
                                self._count, self._tick_lock, lambda: self._closed)
        self._overrides = take_overrides(self)
        self._model_override_names = declare_parameters(self, self._overrides, tuple(VARIANTS), self._log.error,
                                                        self._log.warning, self._count)
        pin_to_cpus(parse_cpus(self._p("cpu_affinity")))  # before the threads and JAX's pool that should follow it
        self._flush_post_set = add_parameter_callbacks(
            self, self._guarded(self._on_set_parameters,
                                lambda exc: SetParametersResult(successful=False, reason=f"internal error: {exc}")),
            self._guarded(self._post_set_parameters))
        self._build_trigger = self.create_guard_condition(self._guarded(self._on_build_trigger))
        self._companion = CompanionServices(self)
        # Lives as long as the node (answers "not configured" meanwhile): a lifecycle transition never destroys
        # it under a call that is waiting for a build.
        self._switch_service = self._companion.create_service(
            SwitchVariant, "~/switch_variant", self._guarded.service(self._on_switch_variant, SwitchVariant.Response))
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        period = float(self._p("diagnostics_period"))
        self._diag_timer = self.create_timer(period, self._guarded(self._publish_diagnostics), clock=steady)
        self._silence_timer = self.create_timer(period, self._guarded(self._on_silence_check), clock=steady)
        self._unknown_topics_warned: set[str] = set()
        self._jump_handle = self.get_clock().create_jump_callback(
            JumpThreshold(min_forward=None, min_backward=Duration(nanoseconds=-1), on_clock_change=False),
            post_callback=self._guarded(self._on_time_jump))
        self.contain_rclpy_callbacks()

    def contain_rclpy_callbacks(self) -> None:
        """The callbacks rclpy and bondpy registered for this node (time source, parameter and lifecycle services,
        the bond) under the node's guard, like its own (``rclpy_callbacks.py``); again after each new entity."""
        contain_entities(self, self._guarded)

    def contain_escaped(self, exc: BaseException) -> None:
        """An exception that escaped into the executor's spin (``spinning.spin_contained``): logged and counted."""
        self._guarded.contained("executor", exc)

    def _p(self, name: str) -> Any:
        return self.get_parameter(name).value

    # ---- configure / activate / deactivate / cleanup (both modes) -------------------------------------
    def _configure(self) -> bool:
        """Load, validate and compile in a worker thread (the file's size limits are in model/limits.py); this
        thread waits for it, publishing diagnostics that say "configuring", and gives up when ROS shuts down."""
        t0 = time.perf_counter()
        try:
            self.refuse_untyped()
            self._host.agents = parse_agents(self._p("agents"))
            slot = self._host.configure(float(self._p("diagnostics_period")),
                                        lambda: self.context.ok() and (self._publish_diagnostics() or True))
        except Exception as exc:  # noqa: BLE001 - reported; the node stays unconfigured
            return self._configure_failed(f"configure failed: {exc}")
        self._loop = self._host.start(slot, self._revert_parameters)
        self._inputs, self._config_error = self._loop.inputs, ""
        try:  # an adapters.* error names the parameter
            self._adapters = AdapterInputs.from_parameters(
                model_parameter_values(self, prefixed_names(self._overrides, "adapters.")), self._host.model)
            if self._host.agents and self._adapters.specs:
                raise ValueError("adapters.*: not available with agents (each agent reads <agent>/observations/*)")
            self._fleet = Fleet(self, self._loop, self._entities) if self._host.agents else None  # agents: fleet.py
            if self._fleet is None:
                self._create_entities()
        except Exception as exc:  # noqa: BLE001 - e.g. a qos_overrides value rclpy cannot use
            self._cleanup()
            return self._configure_failed("configure failed: topics, services and sensor adapters: "
                                          f"{node_help.entity_error(exc, self._overrides)}")
        self._configured = True
        self._log.info(self._host.configured_message(slot, time.perf_counter() - t0))
        return True

    def _configure_failed(self, error: str) -> bool:
        self._config_error, self._host.model = error, None
        if not self._closed:
            self._log.error(error)
        self._count("configure_failures")
        return False

    def _activate(self) -> None:
        self._active = True
        self._inputs.heard_now(time.monotonic())
        self._make_tick_timer()
        self._log.info(f"active: tick {self._tick_mode()}")

    def _deactivate(self) -> None:
        self._active, self._bond = False, bond.stop_bond(self._bond, self)
        self._make_tick_timer()  # inactive: destroys the tick timer

    def _cleanup(self) -> None:
        self._deactivate()
        for kind, obj in self._entities:
            {"pub": self.destroy_publisher, "sub": self.destroy_subscription, "srv": self.destroy_service,
             "lpub": getattr(self, "destroy_lifecycle_publisher", self.destroy_publisher)}[kind](obj)
        self._entities, self._fleet = [], None
        self._host.close("the node was cleaned up (lifecycle cleanup) before the new engine was ready")
        self._configured = False

    def destroy_node(self) -> None:
        self._closed = True
        self._bond = bond.stop_bond(getattr(self, "_bond", None), self)
        if getattr(self, "_host", None) is not None:
            self._host.close("the node is shutting down")
        if getattr(self, "_companion", None) is not None:
            self._companion.close()
        super().destroy_node()

    def build_in_progress(self) -> bool:
        """configure's worker or an engine build is still running (compiling: XLA cannot be interrupted)."""
        return getattr(self, "_host", None) is not None and self._host.in_progress

    # ---- engine builds (engine_host.py) -------------------------------------------------------------
    def _on_build_trigger(self) -> None:
        """Executor callback after the parameter callbacks of one request: one build for the whole request
        (rclpy's set_parameters service sets its parameters one at a time)."""
        if self._build_wanted and self._configured and self._host.builder is not None:
            self._build_wanted = False
            self._host.request_build()

    def _revert_parameters(self, back: dict[str, Any]) -> None:
        """After the newest build failed: the engine parameters ``back`` to what the active engine runs."""
        self._suppress_rebuild = True
        try:
            self.set_parameters([Parameter(n, value=v) for n, v in back.items()])
            self._flush_post_set()
        finally:
            self._suppress_rebuild = False
        self._log.warning(f"parameters reverted to the active engine's: {list(back.items())}")

    # ---- entities -----------------------------------------------------------------------------------
    def _create_entities(self) -> None:
        # Each profile is a default that qos_overrides in the params file replace. Beliefs are transient local,
        # depth 1 by default: a subscriber that joins late (rviz, a logger) gets the latest ones.
        out_qos = lambda: qos(int(self._p("beliefs_qos_depth")), reliable=True, transient_local=True)  # noqa: E731
        make_pub = getattr(self, "create_lifecycle_publisher", None) if self.lifecycle_mode else None
        kind, make_pub = ("lpub", make_pub) if make_pub else ("pub", self.create_publisher)
        published = ["beliefs"] + [f"beliefs/{n}" for n in self._loop.factor_names]
        pubs = [make_pub(Belief if i else Beliefs, topic, out_qos(), qos_overriding_options=overridable())
                for i, topic in enumerate(published)]
        self._beliefs_pub, self._factor_pubs = pubs[0], pubs[1:]
        self._entities += [(kind, p) for p in pubs]
        # `controls` first: when controls and the observations they precede are ready in the same wait, the
        # executor serves subscriptions in creation order, so an fpi tick they trigger sees the new controls.
        inputs = [self._adapters.subscription(i, n, CategoricalObservation) for i, n in enumerate(self._inputs.names)]
        subscribed = ["controls"] + [topic for _, topic in inputs]
        self._entities.append(("sub", self.create_subscription(Controls, "controls", self._guarded(self._on_controls),
                                                               qos(100, reliable=True), qos_overriding_options=overridable())))
        depth = int(self._p("observation_qos_depth"))
        for i, (msg_type, topic) in enumerate(inputs):
            callback = self._on_adapted if i in self._adapters.specs else self._on_observation
            self._entities.append(("sub", self.create_subscription(
                msg_type, topic, self._guarded(functools.partial(callback, i)),
                qos(depth, reliable=False), qos_overriding_options=overridable())))
        self._entities.append(("srv", self.create_service(Trigger, "~/reset", self._guarded.service(self._on_reset, Trigger.Response))))
        self._obs_prefix = self.resolve_topic_name("observations") + "/"
        self._legacy_actions_topic = self.resolve_topic_name("actions")
        for line in node_help.unused_qos_overrides(self._overrides, [self.resolve_topic_name(t) for t in published],
                                                   [self.resolve_topic_name(t) for t in subscribed]):
            self._log.warning(line)

    def _tick_mode(self) -> str:
        return "event-driven" if self._tick_timer is None else f"timer at {self._p('rate_hz'):g} Hz"

    def _make_tick_timer(self) -> None:
        if self._tick_timer is not None:
            self.destroy_timer(self._tick_timer)
            self._tick_timer = None
        rate = float(self._p("rate_hz"))
        if self._active and rate > 0:
            try:
                self._tick_timer = self.create_timer(1.0 / rate, self._guarded(self._tick), clock=self.get_clock())
            except (TypeError, ValueError, OverflowError) as exc:  # parameters.validate_change keeps rate_hz in range
                self._count("callback_errors")
                self._log.error(f"rate_hz {rate:g}: no timer could be made ({exc}); ticking event-driven")

    # ---- inputs -------------------------------------------------------------------------------------
    def _event_mode(self) -> bool:
        return self._tick_timer is None and float(self._p("rate_hz")) == 0.0

    def _on_observation(self, i: int, msg: CategoricalObservation) -> None:
        self._admit(i, msg.level, msg.probabilities, msg.header.stamp.sec, msg.header.stamp.nanosec, label=msg.label)

    def _on_adapted(self, i: int, msg: Any) -> None:
        self._admit(i, **self._adapters.observation(i, msg))

    def _admit(self, i: int, level: int, probabilities: Sequence[float], sec: int, nanosec: int, **judge: Any) -> None:
        """Admit one observation of modality ``i`` (``judge``: ``label`` or ``refused``, see Inputs.observe)."""
        arrival = time.perf_counter()
        with self._tick_lock:
            now = time.monotonic()
            mod = self._inputs.arrived(i, now)
            if not self._active:
                self._count("ignored_inactive")
                return
            self._handle_reset_request()
            got = self._inputs.observe(i, level, probabilities, sec, nanosec, now=now,
                                       now_ns=self.get_clock().now().nanoseconds, arrival=arrival,
                                       timeout_s=float(self._p("observation_timeout")),
                                       max_future_s=float(self._p("max_future_stamp")), **judge)
            self._reporter.admission(admission.report(mod.name, got))
            if got.ok and self._event_mode() and self._inputs.event_ready(now, float(self._p("observation_timeout"))):
                self._tick()

    def _report_silence(self) -> None:
        """Log each modality that went silent, once (its next accepted message clears it)."""
        for line in self._inputs.silence_warnings(time.monotonic(), float(self._p("observation_timeout"))):
            self._log.warning(line)

    def _on_silence_check(self) -> None:
        """Steady timer: report silence; in event mode, tick when a modality went silent while others wait."""
        if not (self._configured and self._active):
            return
        with self._tick_lock:
            self._report_silence()
            if self._event_mode() and (self._fleet.any_ready() if self._fleet else self._inputs.event_ready(
                    time.monotonic(), float(self._p("observation_timeout")))):
                self._tick()

    def _on_controls(self, msg: Controls) -> None:
        if self._host.model is None:
            return
        with self._tick_lock:
            reason = self._loop.add_control(msg.indices, msg.labels, msg.header.stamp.sec, msg.header.stamp.nanosec,
                                            self.get_clock().now().nanoseconds, float(self._p("max_future_stamp")))
        if reason is not None:
            self._count("rejected.bad_control")
            self._warn_throttled(("controls", "bad_control"), f"controls: dropped (bad_control): {reason}")
            return
        self._count("controls")

    def _on_time_jump(self, jump) -> None:
        # Runs in whichever thread moved the clock (the /clock subscription): only flag it; the next
        # observation or tick resets under the tick lock. Switching sim time on/off is not a jump back.
        if jump.delta.nanoseconds < 0 and self._configured:
            self._reset_request = f"clock jumped backwards by {-jump.delta.nanoseconds * 1e-9:.3f} s"

    def _handle_reset_request(self) -> None:
        reason, self._reset_request = self._reset_request, None
        if reason and self._configured:
            self._log.warning(f"{reason} (a looping bag or a restarted simulator?): resetting beliefs to D")
            self._count("time_jump_resets")
            self._loop.restart_time_line()

    # ---- the tick -----------------------------------------------------------------------------------
    def _tick(self) -> None:
        if self._fleet is not None:  # several agents: one batched step (fleet.py)
            return self._fleet.tick()
        with self._tick_lock:
            t_start = time.perf_counter()
            if not self._active:
                return
            self._handle_reset_request()
            slot, now_ns = self._host.slot, self.get_clock().now().nanoseconds
            jump = self._loop.clock_jump(now_ns)
            if jump:
                self._reset_request = jump
                self._handle_reset_request()
                self._loop.clock_jump(now_ns)  # the reset forgot the clock: this tick's is the reference
            if not self._inputs.any_fresh and not self._p("tick_without_observations"):
                self._count("idle_ticks")
                return
            self._report_silence()
            try:
                out = self._loop.step(now_ns)
            except Exception as exc:  # noqa: BLE001 - a tick must never take the node down
                self._count("tick_errors")
                self._warn_throttled("tick_error", f"tick failed: {type(exc).__name__}: {exc}")
                return
            msg = tick_message(self._loop, out, slot)
            for pub, belief in zip(self._factor_pubs, msg.factors):
                pub.publish(belief)
            self._beliefs_pub.publish(msg)
            self._loop.record(out, t_start)

    # ---- services -----------------------------------------------------------------------------------
    def _on_reset(self, request, response):
        if not self._configured:
            response.success, response.message = False, node_help.not_configured(self.get_fully_qualified_name(), self._config_error)
            return response
        with self._tick_lock:
            self._loop.reset()
        self._count("resets")
        response.success, response.message = True, "beliefs reset to D; VMP/MMP window cleared"
        self._log.info(response.message)
        return response

    def _on_switch_variant(self, request, response):
        out = self._host.switch({"algorithm": request.algorithm, "variant": request.variant}, self._set_atomically,
                                lambda: not self._configured, lambda: node_help.not_configured(self.get_fully_qualified_name(), self._config_error))
        response.success, response.message, response.algorithm, response.variant = (
            out.success, out.message, out.algorithm, out.variant)
        return response

    # ---- parameters ---------------------------------------------------------------------------------
    def _on_set_parameters(self, params: list[Parameter]) -> SetParametersResult:
        reason = self._host.change_refused([(p.name, p.value) for p in params])
        if reason is not None:
            self._count("rejected_parameters")
            self._log.warning(f"parameter change refused: {reason}")
            return SetParametersResult(successful=False, reason=reason)
        return SetParametersResult(successful=True)

    def _set_atomically(self, values: dict[str, Any]) -> tuple[bool, str]:
        """The node's own atomic change (its post-set work done on return): (successful, reason)."""
        result = self.set_parameters_atomically([Parameter(n, value=v) for n, v in values.items()])
        self._flush_post_set()
        return result.successful, result.reason

    def _post_set_parameters(self, params: list[Parameter]) -> None:
        names = {p.name for p in params}
        if "use_sim_time" in names:  # the time source made or dropped its /clock subscription
            self.contain_rclpy_callbacks()
        if self._configured and any(read_at_configure(n) for n in names):
            self._log.info(f"{sorted(n for n in names if read_at_configure(n))}: read at the next configure")
        if "rate_hz" in names and self._active:
            self._make_tick_timer()
            self._log.info(f"tick: {self._tick_mode()}")
        if names & set(ENGINE_PARAMETERS) and self._configured and not self._suppress_rebuild:
            self._build_wanted = True
            self._build_trigger.trigger()

    # ---- diagnostics --------------------------------------------------------------------------------
    def _publish_diagnostics(self) -> None:
        """Publish the status (reads state only; ticks and silence reports are the silence timer's)."""
        status = diagnostics.node_status(
            self.get_name(), self.get_fully_qualified_name(), self._host, self._config_error,
            self._loop if self._configured else None, self._reporter.counters, active=self._active, param=self._p,
            clock_ns=self.get_clock().now().nanoseconds, since_start_s=time.monotonic() - self._started_mono,
            duplicate=self._reporter.error_once("duplicate_node_name", node_help.duplicate_name(self)))
        if self._configured and self._fleet is None:  # topics a user may have meant for this node
            self._reporter.warnings(node_help.unknown_topics(self, self._obs_prefix, self._inputs.names,
                                                             self._legacy_actions_topic, self._unknown_topics_warned))
        self._diag_pub.publish(diagnostics.diagnostic_array(status, self.get_clock().now().to_msg()))


class AgentLifecycleNode(_AgentCore, LifecycleNode):
    lifecycle_mode = True

    def __init__(self, **kwargs: Any):
        super().__init__(NODE_NAME, automatically_declare_parameters_from_overrides=True, **kwargs)
        self._core_init()

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        return TransitionCallbackReturn.SUCCESS if self._configure() else TransitionCallbackReturn.FAILURE

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._activate()
        self._bond = bond.start_bond(self)  # Nav2's lifecycle manager: only when bondpy is importable
        self.contain_rclpy_callbacks()  # the bond's subscription
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
        self._config_error = node_help.FINALIZED  # what diagnostics and switch_variant say from now on
        return TransitionCallbackReturn.SUCCESS


class AgentNode(_AgentCore, Node):
    """Plain-node mode: configures and activates itself; raises RuntimeError when the model is refused."""

    lifecycle_mode = False

    def __init__(self, **kwargs: Any):
        super().__init__(NODE_NAME, automatically_declare_parameters_from_overrides=True, **kwargs)
        self._core_init()
        if not self._configure():
            self.destroy_node()
            raise node_help.ConfigureRefused(self._config_error, self._log.name)
        self._activate()
