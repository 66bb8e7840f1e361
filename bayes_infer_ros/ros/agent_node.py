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
       (a factor with controls.<factor>.topic, of its .type: the robot's own command, control_inputs.py)
  out  beliefs                   bayes_infer_ros/Beliefs                  reliable, transient local, depth param (1)
  out  beliefs/<factor>          bayes_infer_ros/Belief                   reliable, transient local, depth param (1)
  out  ~/policy                  bayes_infer_ros/Policy (policy inference on)   as beliefs
  out  ~/events                  bayes_infer_ros/BeliefEvent              reliable, depth 10 (each event that fired)
  out  ~/events/<name>           std_msgs/Bool                            reliable, transient local, depth 1
  out  /diagnostics              diagnostic_msgs/DiagnosticArray          reliable, depth 10
Services (private: under the node's name, remappable): ~/reset (std_srvs/Trigger),
~/switch_variant (bayes_infer_ros/SwitchVariant), ~/set_beliefs (bayes_infer_ros/SetBeliefs), plus the lifecycle
services.
A node serves b agents of one model, b = 1 by default; ``agents: [a, ...]`` only changes b: each agent's topics
above under ``<agent>/`` (``~/<agent>/policy``) plus ``<agent>/reset`` (the events under ``~/<agent>/events``), one
batched tick for all; ~/reset resets them all; ~/set_beliefs names the agent.

The node holds parameters, entities and callbacks; it reads its parameters into one settings snapshot
(``node/settings.py``) at configure and after each accepted change, and each callback is one call of its runtime
(``node/runtime.py``: the settings, the tick lock, the tick loop, the running deployment and the counters), whose
parts live in modules that say what they hold: the tick's semantics in ``inference/belief_filter.py``, the agents'
tick in ``node/tick_loop.py``, deployments off the tick path in ``node/deployer.py`` (each one
``autotune/deployment.py``'s ``deploy``), ``~/switch_variant``'s wait in ``node/switching.py``, input admission and
silence in ``node/admission.py``, counters and throttled warnings in ``node/reporting.py``; here the /diagnostics
status (``diagnostics.py``), the published messages (``messages.py``) and parameter declaration
(``parameter_declaration.py``).

Threading: a SingleThreadedExecutor serves subscriptions, the tick, reset, diagnostics and parameter callbacks
(one at a time, as a mutually exclusive group would). ``switch_variant`` waits for the build, so it is served by
a hidden companion node in its own thread (``companion.py``; rclpy's MultiThreadedExecutor is avoided on purpose,
see there). Builds (autotuner, engine build, compile with tick-shaped inputs) run in a daemon worker thread
(``deployer.Worker``: coalesced, cancelled between phases, nothing installed after cleanup / destroy_node); the
finished engine is swapped in under the runtime's lock (held by each tick), so a swap waits for at most one tick
and a tick never waits for a compile. A failed build keeps the running engine and puts the parameters back. Every
executor callback is wrapped (``_guarded``): an exception is logged and counted, never raised into the executor.
Observation stamps follow ``admission.py``.
"""
from __future__ import annotations

import os

# Before anything imports jax: do not grab most of the GPU at start (a Jetson shares it with the CPU).
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import functools
import time
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from rcl_interfaces.msg import SetParametersResult
from rclpy.clock import Clock, ClockType, JumpThreshold
from rclpy.duration import Duration
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.node import Node
from rclpy.parameter import Parameter
from std_srvs.srv import Trigger

from bayes_infer_ros.inference import VARIANTS

from ..inference.jax_cache import pin_to_cpus
from ..node import help_text as node_help
from ..node.callbacks import CallbackGuard
from ..node.parameters import ENGINE_PARAMETERS, change_refused, parse_cpus, read_at_configure
from ..node.runtime import AgentRuntime
from ..node.settings import NodeSettings
from ..node.switching import switch
from ..node.tick_loop import TickLoop, TickOutput, qualified
from . import bond, diagnostics
from .adapter_inputs import AdapterInputs
from .companion import CompanionServices
from .compat import add_parameter_callbacks
from .control_inputs import ControlInputs
from .event_topics import EventTopics
from .input_diagnostics import InputSource, input_statuses
from .messages import tick_message, tick_policy_message
from .rclpy_callbacks import contain_entities
from .spinning import stop_requested
from .parameter_declaration import UntypedOverrides, declare_parameters, plain_value, take_overrides
from .qos import overridable, profile as qos
from bayes_infer_ros.msg import (  # noqa: E402 (after ros/__init__ path fix)
    Belief, Beliefs, CategoricalObservation, Controls, Policy)
from bayes_infer_ros.srv import SetBeliefs, SwitchVariant

NODE_NAME = "agent"


class _AgentCore(UntypedOverrides):
    """Parameters, entities and callbacks of the agent. Mixed into a Node or a LifecycleNode."""

    lifecycle_mode = True

    def _core_init(self) -> None:
        """Parameters only (so `ros2 param` works while unconfigured), plus what lives as long as the node."""
        self._log = self.get_logger()
        self._build_wanted = self._closed = self._suppress_rebuild = False
        self._config_error, self._started_mono = "", time.monotonic()
        self._tick_timer, self._entities, self._bond = None, [], None
        self._belief_pubs: list[tuple[Any, list[Any]]] = []   # per agent: (beliefs, [beliefs/<factor>])
        self._policy_pubs: list[Any] = []   # per agent: ~/policy (policy inference on)
        self._runtime = AgentRuntime(NodeSettings(), self._log, lambda: self.get_clock().now().nanoseconds,
                                     lambda: self._closed, self._publish_beliefs, self._publish_events)
        self._events: EventTopics | None = None
        self._input_sources: list[InputSource] = []  # every agent's modalities', agent by agent
        self._count = self._runtime.count
        self._guarded = CallbackGuard(self._count, self._runtime.reporter.warn_throttled)
        self._overrides = take_overrides(self)
        declare_parameters(self, self._overrides, tuple(VARIANTS), self._log.error, self._log.warning, self._count)
        self._runtime.apply(self._read_settings())
        pin_to_cpus(parse_cpus(self._settings.cpu_affinity))  # before the threads and JAX's pool that should follow it
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
        period = float(self._settings.diagnostics_period)
        self._diag_timer = self.create_timer(period, self._guarded(self._publish_diagnostics), clock=steady)
        self._silence_timer = self.create_timer(period, self._guarded(self._runtime.silence_check), clock=steady)
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

    @property
    def _settings(self) -> NodeSettings:
        """The settings the runtime runs under now (the snapshot of the last accepted parameter change)."""
        return self._runtime.settings

    def _read_settings(self) -> NodeSettings:
        """A snapshot of the node's parameters now: the table's (``policy.*`` too), ``use_sim_time`` and the nested
        groups given at start (``model.*``, ``adapters.*``, ``surprise_*``)."""
        declared = self.get_parameters_by_prefix("")  # every declared parameter, by its full name
        return NodeSettings.from_values({n: plain_value(p.value) for n, p in declared.items()
                                         if NodeSettings.reads(n)})

    # ---- configure / activate / deactivate / cleanup (both modes) -------------------------------------
    def _configure(self) -> bool:
        """configure, step by step: read the settings; refuse what ROS could not type and service names that clash;
        then, in the runtime's worker thread (this thread publishing diagnostics that say "configuring", and giving
        up when ROS shuts down), the model, its sensor adapters and its first engine; then the topics and services."""
        t0 = time.perf_counter()
        try:
            settings = self._read_settings()
            self.refuse_untyped()
            self._refuse_service_clashes(settings.agents)
            self._runtime.configure(settings, settings.diagnostics_period,
                                    lambda: self.context.ok() and not stop_requested()
                                    and (self._publish_diagnostics() or True),
                                    self._revert_parameters, self._check_adapters)
            self._runtime.bind_control_adapters(list(self._controls.specs.values()))
        except Exception as exc:  # noqa: BLE001 - reported; the node stays unconfigured
            return self._configure_failed(f"configure failed: {exc}")
        self._config_error = ""
        try:
            self._create_entities(self._runtime.loop)
        except Exception as exc:  # noqa: BLE001 - e.g. a qos_overrides value rclpy cannot use
            self._cleanup()
            return self._configure_failed("configure failed: topics and services: "
                                          f"{node_help.entity_error(exc, self._overrides)}")
        self._log.info(self._runtime.configured_message(time.perf_counter() - t0))
        self._runtime.verify()  # off the tick path: a faster engine is swapped in when it is measured
        return True

    def _refuse_service_clashes(self, agents: Any) -> None:
        """Before the build: the services' names depend on the agents alone."""
        node_help.refuse_name_clashes(
            [(self.resolve_service_name("~/reset"), "the node's ~/reset (every agent)"),
             (self.resolve_service_name("~/set_beliefs"), "the node's ~/set_beliefs")]
            + [(self.resolve_service_name(f"{a}/reset"), f"agent {a!r}'s reset") for a in agents], "service")

    def _check_adapters(self, model: Any) -> None:
        """Before the engine build: the sensor and control adapters against the model and the installed message
        definitions (an adapters.* or controls.* error names the parameter)."""
        self._adapters = AdapterInputs.from_parameters(dict(self._settings.adapters), model)
        self._controls = ControlInputs.from_parameters(dict(self._settings.controls), model)

    def _configure_failed(self, error: str) -> bool:
        self._config_error = error
        self._runtime.cleanup(error)
        if not self._closed and not stop_requested():  # a stop (SIGINT) that ends configure is no error
            self._log.error(error)
        self._count("configure_failures")
        return False

    def _activate(self) -> None:
        self._runtime.activate()
        self._make_tick_timer()
        self._log.info(f"active: tick {self._tick_mode()}")

    def _deactivate(self) -> None:
        self._runtime.deactivate()
        self._bond = bond.stop_bond(self._bond, self)
        self._make_tick_timer()  # inactive: destroys the tick timer

    def _cleanup(self) -> None:
        self._deactivate()
        for kind, obj in self._entities:
            {"pub": self.destroy_publisher, "sub": self.destroy_subscription, "srv": self.destroy_service,
             "lpub": getattr(self, "destroy_lifecycle_publisher", self.destroy_publisher)}[kind](obj)
        self._entities, self._belief_pubs, self._policy_pubs = [], [], []
        self._events, self._input_sources = None, []
        self._runtime.cleanup("the node was cleaned up (lifecycle cleanup) before the new engine was ready")

    def destroy_node(self) -> None:
        self._closed = True
        self._bond = bond.stop_bond(getattr(self, "_bond", None), self)
        if getattr(self, "_runtime", None) is not None:
            self._runtime.cleanup("the node is shutting down")
        if getattr(self, "_companion", None) is not None:
            self._companion.close()
        super().destroy_node()

    def build_in_progress(self) -> bool:
        """configure's worker or an engine build is still running (compiling: XLA cannot be interrupted)."""
        return getattr(self, "_runtime", None) is not None and self._runtime.in_progress

    # ---- deployments (node/deployer.py) ------------------------------------------------------------
    def _on_build_trigger(self) -> None:
        """Executor callback after the parameter callbacks of one request: one build for the whole request
        (rclpy's set_parameters service sets its parameters one at a time)."""
        if self._build_wanted and self._runtime.configured:
            self._build_wanted = False
            self._runtime.apply(self._settings, deploy=True)

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
    def _create_entities(self, loop: TickLoop) -> None:
        """Each agent's topics and services (under ``<agent>/`` when ``agents`` is set), and the node's ~/reset.
        Each QoS profile is a default that qos_overrides in the params file replace. Beliefs (and policies) are
        transient local, depth 1 by default: a subscriber that joins late (rviz, a logger) gets the latest ones."""
        several = loop.agents != [""]
        plan = [(k, qualified(a, "")) for k, a in enumerate(loop.agents)]
        policy_topics = [f"~/{prefix}policy" for _, prefix in plan] if loop.policy is not None else []
        published = [t for _, prefix in plan
                     for t in [f"{prefix}beliefs"] + [f"{prefix}beliefs/{f}" for f in loop.factor_names]]
        published += policy_topics
        inputs = [(k, i, *self._adapters.subscription(i, name, CategoricalObservation, prefix))
                  for k, prefix in plan for i, name in enumerate(loop.modality_names)]
        adapted_controls = [(k, f, *self._controls.subscription(f, prefix)) for k, prefix in plan
                            for f in sorted(self._controls.specs)]
        subscribed = ([f"{prefix}controls" for _, prefix in plan] + [topic for *_, topic in adapted_controls]
                      + [topic for _, _, _, topic in inputs])
        event_specs = self._runtime.events.specs
        published += EventTopics.topics_of([prefix for _, prefix in plan], event_specs)
        # two modalities may read one sensor topic; two publishers on one topic would interleave
        node_help.refuse_name_clashes([(self.resolve_topic_name(t), f"the publisher {t}") for t in published], "topic")
        out_qos = lambda: qos(int(self._settings.beliefs_qos_depth), reliable=True, transient_local=True)  # noqa: E731
        make_pub = getattr(self, "create_lifecycle_publisher", None) if self.lifecycle_mode else None
        kind, make_pub = ("lpub", make_pub) if make_pub else ("pub", self.create_publisher)
        for _, prefix in plan:
            topics = [f"{prefix}beliefs"] + [f"{prefix}beliefs/{f}" for f in loop.factor_names]
            pubs = [make_pub(Belief if i else Beliefs, topic, out_qos(), qos_overriding_options=overridable())
                    for i, topic in enumerate(topics)]
            self._belief_pubs.append((pubs[0], pubs[1:]))
            self._entities += [(kind, p) for p in pubs]
        for topic in policy_topics:
            self._policy_pubs.append(make_pub(Policy, topic, out_qos(), qos_overriding_options=overridable()))
            self._entities.append((kind, self._policy_pubs[-1]))
        # `controls` first: when controls and the observations they precede are ready in the same wait, the
        # executor serves subscriptions in creation order, so an fpi tick they trigger sees the new controls.
        for k, prefix in plan:
            self._entities.append(("sub", self.create_subscription(
                Controls, f"{prefix}controls", self._guarded(functools.partial(self._on_controls, k)),
                qos(100, reliable=True), qos_overriding_options=overridable())))
        for k, f, msg_type, topic in adapted_controls:  # before the observations too, as `controls`
            self._entities.append(("sub", self.create_subscription(
                msg_type, topic, self._guarded(functools.partial(self._on_control_adapted, k, f)),
                qos(100, reliable=True), qos_overriding_options=overridable())))
        depth = int(self._settings.observation_qos_depth)
        for k, i, msg_type, topic in inputs:
            callback = self._on_adapted if i in self._adapters.specs else self._on_observation
            self._entities.append(("sub", self.create_subscription(
                msg_type, topic, self._guarded(functools.partial(callback, k, i)),
                qos(depth, reliable=False), qos_overriding_options=overridable())))
        self._entities.append(("srv", self.create_service(
            Trigger, "~/reset", self._guarded.service(functools.partial(self._on_reset, None), Trigger.Response))))
        self._entities.append(("srv", self.create_service(
            SetBeliefs, "~/set_beliefs", self._guarded.service(self._on_set_beliefs, SetBeliefs.Response))))
        self._events = EventTopics(self.create_publisher, [prefix for _, prefix in plan], event_specs)
        self._entities += [("pub", p) for p in self._events.entities]
        self._input_sources = [InputSource(self.resolve_topic_name(topic), _type_name(msg_type))
                               for _, _, msg_type, topic in inputs]
        for k, prefix in plan if several else ():
            self._entities.append(("srv", self.create_service(
                Trigger, f"{prefix}reset", self._guarded.service(functools.partial(self._on_reset, k),
                                                                  Trigger.Response))))
        self._obs_prefixes = [self.resolve_topic_name(f"{prefix}observations") + "/" for _, prefix in plan]
        self._legacy_actions_topic = self.resolve_topic_name("actions")
        for line in node_help.unused_qos_overrides(self._overrides, [self.resolve_topic_name(t) for t in published],
                                                   [self.resolve_topic_name(t) for t in subscribed]):
            self._log.warning(line)

    def _tick_mode(self) -> str:
        return "event-driven" if self._tick_timer is None else f"timer at {self._settings.rate_hz:g} Hz"

    def _make_tick_timer(self) -> None:
        if self._tick_timer is not None:
            self.destroy_timer(self._tick_timer)
            self._tick_timer = None
        rate = float(self._settings.rate_hz)
        if self._runtime.active and rate > 0:
            try:
                self._tick_timer = self.create_timer(1.0 / rate, self._guarded(self._runtime.tick),
                                                     clock=self.get_clock())
            except (TypeError, ValueError, OverflowError) as exc:  # parameters.validate_change keeps rate_hz in range
                self._count("callback_errors")
                self._log.error(f"rate_hz {rate:g}: no timer could be made ({exc}); ticking event-driven")
                self._runtime.apply(self._settings.replace(rate_hz=0.0))

    # ---- inputs -------------------------------------------------------------------------------------
    def _on_observation(self, k: int, i: int, msg: CategoricalObservation) -> None:
        self._runtime.observe(k, i, msg.level, msg.probabilities, msg.header.stamp.sec, msg.header.stamp.nanosec,
                              label=msg.label)

    def _on_adapted(self, k: int, i: int, msg: Any) -> None:
        self._runtime.observe(k, i, **self._adapters.observation(i, msg))

    def _on_controls(self, k: int, msg: Controls) -> None:
        self._runtime.control(k, msg.indices, msg.labels, msg.header.stamp.sec, msg.header.stamp.nanosec)

    def _on_control_adapted(self, k: int, f: int, msg: Any) -> None:
        got = self._controls.read(f, msg)
        self._runtime.control_adapted(k, f, got.reading, got.sec, got.nanosec)

    def _on_time_jump(self, jump) -> None:
        # Runs in whichever thread moved the clock (the /clock subscription): only flag it; the next
        # observation or tick resets under the runtime's lock. Switching sim time on/off is not a jump back.
        if jump.delta.nanoseconds < 0:
            self._runtime.request_reset(f"clock jumped backwards by {-jump.delta.nanoseconds * 1e-9:.3f} s")

    # ---- the tick's output ---------------------------------------------------------------------------
    def _publish_beliefs(self, k: int, out: TickOutput, deployment: Any, loop: TickLoop) -> None:
        msg = tick_message(loop, k, out, deployment)
        beliefs_pub, factor_pubs = self._belief_pubs[k]
        for pub, belief in zip(factor_pubs, msg.factors):
            pub.publish(belief)
        beliefs_pub.publish(msg)
        policy = tick_policy_message(loop, k, out, msg)
        if policy is not None:
            self._policy_pubs[k].publish(policy)

    def _publish_events(self, k: int, events: Any) -> None:
        if self._events is not None:
            self._events.publish(k, events)

    # ---- services -----------------------------------------------------------------------------------
    def _on_reset(self, k, request, response):
        if not self._runtime.configured:
            response.success = False
            response.message = node_help.not_configured(self.get_fully_qualified_name(), self._config_error)
            return response
        response.success, response.message = True, self._runtime.reset(k)
        self._log.info(response.message)
        return response

    def _on_set_beliefs(self, request, response):
        loop = self._runtime.loop
        if loop is None:
            response.success = False
            response.message = node_help.not_configured(self.get_fully_qualified_name(), self._config_error)
            return response
        agent = str(request.agent)
        if agent not in loop.agents:
            response.success = False
            response.message = (f"agent: {agent!r} is not one of this node's agents {loop.agents}"
                                if loop.agents != [""] else f"agent: {agent!r}: this node serves one agent; leave "
                                                            "agent empty")
            return response
        response.success, response.message = self._runtime.set_beliefs(
            loop.agents.index(agent), list(request.factors), list(request.levels), list(request.probabilities))
        if response.success:  # one severity per call site: rclpy's logger refuses a site that changes it
            self._log.info(f"set_beliefs: {response.message}")
        else:
            self._log.warning(f"set_beliefs refused: {response.message}")
        return response

    def _on_switch_variant(self, request, response):
        out = switch(self._runtime, {"algorithm": request.algorithm, "variant": request.variant}, self._set_atomically,
                     lambda: node_help.not_configured(self.get_fully_qualified_name(), self._config_error),
                     lambda: self._closed)
        response.success, response.message, response.algorithm, response.variant = (
            out.success, out.message, out.algorithm, out.variant)
        return response

    # ---- parameters ---------------------------------------------------------------------------------
    def _on_set_parameters(self, params: list[Parameter]) -> SetParametersResult:
        reason = change_refused([(p.name, p.value) for p in params], variants=tuple(VARIANTS),
                                model=self._runtime.model, memory_budget_mb=self._settings.memory_budget_mb)
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
        self._runtime.apply(self._read_settings())  # the new snapshot; an engine change deploys below
        if "use_sim_time" in names:  # the time source made or dropped its /clock subscription
            self.contain_rclpy_callbacks()
        configured = self._runtime.configured
        if configured and any(read_at_configure(n) for n in names):
            self._log.info(f"{sorted(n for n in names if read_at_configure(n))}: read at the next configure")
        if "rate_hz" in names and self._runtime.active:
            self._make_tick_timer()
            self._log.info(f"tick: {self._tick_mode()}")
        if names & set(ENGINE_PARAMETERS) and configured and not self._suppress_rebuild:
            self._build_wanted = True
            self._build_trigger.trigger()

    # ---- diagnostics --------------------------------------------------------------------------------
    def _publish_diagnostics(self) -> None:
        """Publish the status (reads state only; ticks and silence reports are the silence timer's)."""
        reporter = self._runtime.reporter
        status = diagnostics.node_status(
            self.get_name(), self.get_fully_qualified_name(), self._runtime, self._config_error,
            clock_ns=self.get_clock().now().nanoseconds, since_start_s=time.monotonic() - self._started_mono,
            duplicate=reporter.error_once("duplicate_node_name", node_help.duplicate_name(
                self.get_node_names_and_namespaces(), self.get_name(), self.get_namespace(),
                self.get_fully_qualified_name())))
        loop = self._runtime.loop
        if loop is not None:  # topics a user may have meant for this node
            topic_names = [name for name, _types in self.get_topic_names_and_types()]
            for prefix in self._obs_prefixes:
                reporter.warnings(node_help.unknown_topics(
                    topic_names, prefix, loop.modality_names, self._legacy_actions_topic,
                    self._legacy_actions_topic in topic_names and self.count_publishers(self._legacy_actions_topic) > 0,
                    self.resolve_topic_name("controls"), self._unknown_topics_warned))
        self._diag_pub.publish(diagnostics.diagnostic_array(status, self.get_clock().now().to_msg(),
                                                            self._input_statuses()))

    def _input_statuses(self) -> list[Any]:
        """Each modality's and control adapter's status (none before configure)."""
        runtime, loop = self._runtime, self._runtime.loop
        if loop is None or len(self._input_sources) != len(loop.modalities):
            return []
        surprise = [stats for _, _, stats in loop.surprise_statistics()] or [None] * len(loop.modalities)
        feeds = [(feed, self.resolve_topic_name(feed.topic)) for per_agent in runtime.control_feeds
                 for feed in per_agent.values()]
        return input_statuses(self.get_fully_qualified_name(), loop.modalities, self._input_sources, surprise, feeds,
                              runtime.now_s(), time.monotonic(), active=runtime.active,
                              timeout_s=runtime.settings.observation_timeout)


def _type_name(msg_type: type) -> str:
    """``pkg/msg/Name`` of a generated message class."""
    return f"{msg_type.__module__.split('.')[0]}/msg/{msg_type.__name__}"


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
        if self._runtime.configured:
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
