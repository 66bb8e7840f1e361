"""One node's runtime without ROS: :class:`AgentRuntime` owns the settings snapshot, the tick lock, the tick loop of
the node's agents, the deployment that runs (``autotune.deployment.Deployment``), the deployer that replaces it off
the tick path (``deployer.py``) and the counters (``reporting.py``). The ROS node (``ros/agent_node.py``) wires its
entities to it: each subscription, timer and service callback is one call here, for agent ``k`` (``k = 0`` for a
node's single agent), and each accepted parameter change is a new :class:`~.settings.NodeSettings`
(:meth:`AgentRuntime.apply`).

One lock, one writer at a time: an admitted observation, a control, a tick, a reset and an engine swap each hold
:attr:`AgentRuntime.lock`; a swap waits for at most the tick in progress, and a tick never waits for a compile
(deployments run in the deployer's worker thread). A backwards jump of the clock, seen in whichever thread moved it,
is only flagged (:meth:`AgentRuntime.request_reset`); the next observation or tick resets under the lock.

Configure is a list of named steps (:meth:`AgentRuntime.configure`), run in a worker thread while the caller's thread
keeps publishing what it is doing: set up JAX, load the model, check what else must fit it (the sensor and control
adapters, the belief events, the surprise settings, the policy settings), deploy its first engine and its policy
inference (built once per configure: an engine swap keeps it), then start the tick loop and the deployer; the caller
then binds the control adapters (:meth:`AgentRuntime.bind_control_adapters`) and starts the engine's verify step
(:meth:`AgentRuntime.verify`).

After each step the agents' beliefs go through their belief events (``events_stage.py``) and the events that fired
are handed to ``publish_events``; a control adapter's message is one :meth:`AgentRuntime.control_adapted` call
(``control_feeds.py``), and ``~/set_beliefs`` one :meth:`AgentRuntime.set_beliefs`.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, NamedTuple, Optional, Sequence

import numpy as np

from ..adapters.controls import ControlSpec, control_targets
from ..adapters.events import Event
from ..adapters.reading import Reading
from ..autotune.deployment import Deployment, deploy_policy
from ..inference import jax_cache
from ..inference.algorithm_specs import algorithm_spec
from . import admission
from .belief_setting import parse_setting
from .control_feeds import ControlFeed, control_feeds
from .deployer import BuildCancelled, Deployer, deploy_settings, prune_compilation_cache
from .events_stage import EventsStage, events_for_model
from .model_source import node_model
from .policy_stage import PolicyStage, policy_plan
from .reporting import Reporter, forward_cache_warnings
from .settings import NodeSettings
from .surprise import SurpriseSettings, settings_from_parameters
from .tick_loop import TickLoop, TickOutput, qualified

# publish(k, out, deployment, loop): agent k's beliefs of one step, run by the engine of ``deployment``
Publish = Callable[[int, TickOutput, Deployment, TickLoop], None]
# publish_events(k, events): agent k's belief events that fired (a step's, or a reset's)
PublishEvents = Callable[[int, Sequence[Event]], None]


class Configured(NamedTuple):
    """What configure's steps made: the model, the evidence's settings (None: off), the first deployment, the
    policy inference (None: off) and the belief events by name."""

    model: Any
    surprise: Optional[SurpriseSettings]
    deployment: Deployment
    policy: Optional[PolicyStage]
    events: dict[str, Any]


class AgentRuntime:
    """``settings``: the node's settings now; ``log``: its logger; ``clock_ns()``: the node clock (ns; 0 while sim
    time has no /clock); ``closed()``: True once the node is being destroyed; ``publish``: what a tick publishes for
    each agent that stepped; ``publish_events``: the belief events that fired, per agent."""

    def __init__(self, settings: NodeSettings, log: Any, clock_ns: Callable[[], int], closed: Callable[[], bool],
                 publish: Publish, publish_events: Optional[PublishEvents] = None):
        self.settings = settings
        self.lock = threading.RLock()
        self.reporter = Reporter(log, closed)
        self.count = self.reporter.count
        forward_cache_warnings(log)
        self._log, self._clock_ns, self._closed, self._publish = log, clock_ns, closed, publish
        self.model: Any = None
        self.loop: Optional[TickLoop] = None
        self.deployment: Optional[Deployment] = None  # what runs
        self.deployer: Optional[Deployer] = None
        self.active = False
        self.stage = ""  # what configure is doing ("" when it is not)
        self.configure_thread: Optional[threading.Thread] = None
        self._reset_request: Optional[str] = None
        self._clock_started = False  # the node clock read past 0 (sim time: a /clock came)
        self._publish_events = publish_events or (lambda k, events: None)
        self.events = EventsStage((), 0, ())               # the belief events (configure sets them)
        self.control_feeds: list[dict[int, ControlFeed]] = []  # per agent: its control adapters, by factor index

    @property
    def configured(self) -> bool:
        return self.loop is not None

    @property
    def device(self) -> str:
        """Where the running engine's calls run (``cpu:0``, ``gpu:0``; "" before configure)."""
        return self.deployment.device if self.deployment is not None else ""

    @property
    def busy(self) -> bool:
        """A deployment is requested or under way."""
        return self.deployer is not None and self.deployer.busy

    @property
    def in_progress(self) -> bool:
        """configure's worker or a deployment is still running (compiling: XLA cannot be interrupted)."""
        configure = self.configure_thread
        return (configure is not None and configure.is_alive()) or self.busy

    def agent_prefix(self, k: int) -> str:
        """Agent ``k``'s prefix of counters and topics: ``<agent>/``, or "" for a node's single agent."""
        return qualified(self.loop.agents[k], "") if self.loop is not None else ""

    # ---- lifecycle ------------------------------------------------------------------------------------
    def configure(self, settings: NodeSettings, period_s: float, keep_waiting: Callable[[], bool],
                  on_failed: Callable[[dict[str, Any]], None],
                  check_model: Callable[[Any], None] = lambda model: None) -> Deployment:
        """Configure under ``settings``: :meth:`_configure_steps` in a daemon worker thread while this thread calls
        ``keep_waiting()`` every ``period_s`` (False: give up, RuntimeError); then the tick loop and the deployer
        (``on_failed(back)``: after the newest deployment failed, the engine parameters to put back). Raises what a
        step raised: ``check_model(model)`` (the sensor adapters) and the surprise settings are checked before any
        engine is built, and so are the policy settings."""
        self.settings = settings
        outcome: dict[str, Any] = {}
        done = threading.Event()

        def work() -> None:
            try:
                outcome["result"] = self._configure_steps(settings, check_model)
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
                outcome["error"] = exc
            finally:
                done.set()

        self.stage = "configuring: loading the model"
        self.configure_thread = threading.Thread(target=work, name="configure", daemon=True)
        self.configure_thread.start()
        try:
            while not done.wait(period_s):
                if not keep_waiting():
                    raise RuntimeError("ROS is shutting down")
        finally:
            self.stage = ""
        if "error" in outcome:
            raise outcome["error"]
        model, surprise, deployment, policy, events = outcome["result"]
        for warning in deployment.warnings:
            self._log.warning(warning)
        with self.lock:
            self.model = model
            self.loop = TickLoop(model, deployment.engine, settings.horizon, settings.agents, surprise, policy)
            self.events = EventsStage(list(events.values()), len(self.loop.agents), model.num_states)
            self.deployment = deployment
        self.deployer = Deployer(model, settings, self._install, lambda: self.deployment, on_failed, self._log,
                                 self.count, self._closed)
        return deployment

    def verify(self) -> Optional[Any]:
        """Start the running engine's verify step off the tick path (its job; None when there is nothing to verify
        or no engine): configure's deployment is verified once the node is up."""
        if self.deployer is None or self.deployment is None:
            return None
        return self.deployer.verify(self.deployment)

    def _configure_steps(self, settings: NodeSettings, check_model: Callable[[Any], None]) -> Configured:
        """configure's work, step by step (in its worker thread)."""
        self._set_up_jax(settings)
        model = node_model(settings, self._log, self.count)
        check_model(model)
        events = events_for_model(settings.events, model)
        surprise = self._surprise_settings(settings, model)
        plan = policy_plan(settings.policy, model)
        self._check_algorithm(settings, model)
        self.stage = "configuring: compiling the engine"
        deployment = self._first_deployment(settings, model)
        policy = None
        if plan is not None:
            self.stage = "configuring: compiling policy inference"
            policy = self._policy_stage(settings, model, plan)
        prune_compilation_cache(settings, self._log, self.count)
        return Configured(model, surprise, deployment, policy, events)

    def _set_up_jax(self, settings: NodeSettings) -> None:
        """JAX's default device stays the host CPU (a deployment places each engine on the device it chose), with the
        persistent compilation cache, pruned to its cap."""
        jax_cache.setup_jax("cpu", str(settings.jax_compilation_cache_dir or ""))
        prune_compilation_cache(settings, self._log, self.count)

    @staticmethod
    def _surprise_settings(settings: NodeSettings, model: Any) -> Optional[SurpriseSettings]:
        """The gates, thresholds and windows of the evidence (None with ``evidence`` off), checked against the model
        (ValueError naming a parameter that names no modality of the model or is not a positive number)."""
        if not settings.evidence:
            return None
        return settings_from_parameters(settings.surprise,
                                        [model.modality_name(i) for i in range(model.num_modalities)],
                                        settings.surprise_warn_ticks, settings.surprise_window)

    @staticmethod
    def _check_algorithm(settings: NodeSettings, model: Any) -> None:
        if algorithm_spec(settings.algorithm).window and model.B is None:
            raise ValueError(f"algorithm: {settings.algorithm} needs transition tensors B; the model has none (set "
                             "algorithm: fpi, or add B to the model, then configure again)")

    @staticmethod
    def _first_deployment(settings: NodeSettings, model: Any) -> Deployment:
        try:
            return deploy_settings(model, settings)
        except Exception as exc:  # noqa: BLE001
            raise RuntimeError(f"engine build: {exc}") from exc

    @staticmethod
    def _policy_stage(settings: NodeSettings, model: Any, plan: Any) -> PolicyStage:
        """The agents' policy inference, built and compiled (``deploy_policy``)."""
        p = settings.policy
        try:
            inference = deploy_policy(plan, max(len(settings.agents), 1), p.seed)
        except Exception as exc:  # noqa: BLE001
            raise RuntimeError(f"policy inference build: {exc}") from exc
        return PolicyStage(inference, np.concatenate([np.asarray(d) for d in model.D]), p.seed, p.publish_controls)

    def configured_message(self, elapsed_s: float) -> str:
        """The line configure logs when it succeeded (``elapsed_s``: how long it took)."""
        model, d = self.model, self.deployment
        modalities = [model.modality_name(i) for i in range(model.num_modalities)]
        factors = [model.factor_name(f) for f in range(model.num_factors)]
        policy = self.loop.policy if self.loop is not None else None
        planning = "policy inference off" if policy is None else (
            f"policy inference: {policy.plan.num_policies} policies of {policy.plan.policy_len} step(s), "
            f"{policy.plan.selection} ({policy.inference.backend})"
            + (", publish_controls" if policy.publish_controls else ""))
        return (f"configured in {elapsed_s:.2f} s: {model.num_modalities} modalities {modalities}, "
                f"{model.num_factors} factors {factors}, algorithm={d.config.algorithm}, variant={d.variant}, "
                f"device={d.device} ({d.note}), build {d.compile_s:.2f} s; {planning}")

    def apply(self, settings: NodeSettings, deploy: bool = False) -> Optional[Any]:
        """Run under ``settings`` from now on; ``deploy``: also deploy the engine they describe off the tick path
        (the request's ticket; None when not configured)."""
        self.settings = settings
        deployer = self.deployer
        if not deploy or deployer is None or not self.configured:
            return None
        return deployer.request(settings)

    def now_s(self, now_ns: Optional[int] = None) -> float:
        """Seconds on the clock the silence timeout and the input rates run on (``silence_clock``): the node clock
        (``now_ns``, read when not given) or the host's monotonic clock. The node clock's first reading past 0 (sim
        time's first /clock) restarts every modality's timeout."""
        if self.settings.silence_clock == "wall":
            return time.monotonic()
        now_ns = self._clock_ns() if now_ns is None else now_ns
        if now_ns > 0 and not self._clock_started:
            self._clock_started = True
            if self.loop is not None:
                self.loop.heard_now(now_ns * 1e-9)
        return now_ns * 1e-9

    def activate(self) -> None:
        with self.lock:
            self.active = True
            if self.loop is not None:
                self.loop.heard_now(self.now_s())

    def deactivate(self) -> None:
        with self.lock:
            self.active = False

    def cleanup(self, reason: str) -> None:
        """Stop ticking, cancel deployments (their waiters get ``reason``) and drop the model and the engine."""
        if self.deployer is not None:
            self.deployer.close(reason)
            self.deployer = None
        with self.lock:
            self.active = False
            self.loop = self.deployment = self.model = None
            self.events, self.control_feeds = EventsStage((), 0, ()), []

    def _install(self, deployment: Deployment) -> None:
        """The deployer's finished deployment: swapped in atomically (the next tick runs it)."""
        with self.lock:
            if self.loop is None:
                raise BuildCancelled("the node was cleaned up before the new engine was ready")
            self.loop.filter.swap(deployment.engine, deployment.config.horizon)
            self.deployment = deployment

    # ---- inputs -----------------------------------------------------------------------------------------
    def observe(self, k: int, i: int, level: int, probabilities: Sequence[float], sec: int, nanosec: int,
                **judge: Any) -> None:
        """Admit one observation of agent ``k``'s modality ``i`` (``judge``: ``label`` or ``refused``, see
        :meth:`~.admission.Inputs.observe`); in event mode, tick once every agent's input is in."""
        arrival = time.perf_counter()
        with self.lock:
            loop = self.loop
            if loop is None:
                return
            now_ns = self._clock_ns()
            now = self.now_s(now_ns)
            inputs = loop.agent_inputs[k]
            mod = inputs.arrived(i, now)
            if not self.active:
                self.count("ignored_inactive")
                return
            self._handle_reset_request()
            settings = self.settings
            timeout = settings.observation_timeout
            got = inputs.observe(i, level, probabilities, sec, nanosec, now=now, now_ns=now_ns,
                                 arrival=arrival, timeout_s=timeout, max_future_s=settings.max_future_stamp, **judge)
            self.reporter.admission(admission.report(mod.name, got, mod.topic), self.agent_prefix(k))
            if got.ok and settings.event_mode and inputs.event_ready(now, timeout):
                self.tick()

    def control(self, k: int, indices: Any, labels: Any, sec: int, nanosec: int) -> None:
        """Add one ``Controls`` message to agent ``k``'s timeline, or count and log why it was dropped."""
        with self.lock:
            loop = self.loop
            if loop is None:
                return
            reason = loop.add_control(k, indices, labels, sec, nanosec, self._clock_ns(),
                                      self.settings.max_future_stamp)
        prefix = self.agent_prefix(k)
        if reason is not None:
            self.count(f"{prefix}rejected.bad_control")
            self.reporter.warn_throttled((f"{prefix}controls", "bad_control"),
                                         f"{prefix}controls: dropped (bad_control): {reason}")
            return
        self.count(f"{prefix}controls")

    def bind_control_adapters(self, specs: Sequence[ControlSpec]) -> None:
        """The control adapters of the configured model (checked bindings, ``adapters/controls.py``): one feed per
        agent and factor; a ``Controls`` message's entry for these factors is ignored from now on."""
        with self.lock:
            loop = self.loop
            if loop is None:
                return
            labels = control_targets(self.model)[1]
            self.control_feeds = [control_feeds(specs, self.agent_prefix(k), labels) for k in range(len(loop.agents))]
            for feed in (self.control_feeds[0] if self.control_feeds else {}).values():
                loop.adapter_factors[feed.factor_index] = True
                self._log.info(f"factor {feed.factor}: its control comes from controls.{feed.factor} ({feed.type} on "
                               f"{feed.topic}); its entry in Controls messages is ignored")

    def control_adapted(self, k: int, f: int, reading: Reading, sec: int, nanosec: int) -> None:
        """One message of agent ``k``'s control adapter of factor ``f``, read (``reading``: a control index or a
        refusal) with its header stamp ((0, 0): none): placed on the agent's control timeline, or counted
        (``<agent>/rejected.<reason>``) and logged (throttled) as a refused input."""
        now = time.monotonic()
        with self.lock:
            loop = self.loop
            if loop is None or k >= len(self.control_feeds):
                return
            feed = self.control_feeds[k][f]
            feed.received += 1
            refused = None if reading.ok else (str(reading.reason), reading.detail)
            if refused is None:
                refused = loop.add_factor_control(k, f, int(reading.level), sec, nanosec, self._clock_ns(),
                                                  self.settings.max_future_stamp)
            if refused is None:
                feed.accept(int(reading.level), now)
            else:
                feed.refuse(*refused, now)
        prefix = self.agent_prefix(k)
        if refused is not None:
            reason, detail = refused
            self.count(f"{prefix}rejected.{reason}")
            self.reporter.warn_throttled((feed.topic, reason), f"{feed.name} on {feed.topic}: dropped ({reason}): "
                                                               f"{detail}")
            return
        self.count(feed.name)

    def set_beliefs(self, k: int, factors: Sequence[str], levels: Sequence[str],
                    probabilities: Sequence[float]) -> tuple[bool, str]:
        """``~/set_beliefs`` for agent ``k``: its next step starts from the prior set (``belief_setting.py``,
        ``BeliefFilter.set_prior``); (success, the answer: what was set, or why not, naming the factor or level)."""
        with self.lock:
            loop, model = self.loop, self.model
            if loop is None:
                return False, "not configured"
            names = [model.factor_name(f) for f in range(model.num_factors)]
            labels = [model.state_label_list(f) for f in range(model.num_factors)]
            setting, reason = parse_setting(factors, levels, probabilities, names, labels)
            if setting is None:
                return False, reason
            loop.filter.set_prior(k, setting.prior, setting.factors)
        prefix = self.agent_prefix(k)
        self.count(f"{prefix}set_beliefs")
        return True, f"{prefix.rstrip('/') + ': ' if prefix else ''}the next step's prior: {setting.summary}"

    def request_reset(self, reason: str) -> None:
        """Ask for every agent's reset at the next observation or tick (any thread: the clock's jump callback)."""
        if self.configured:
            self._reset_request = reason

    def _handle_reset_request(self) -> None:
        reason, self._reset_request = self._reset_request, None
        if reason and self.loop is not None:
            self._log.warning(f"{reason} (a looping bag or a restarted simulator?): resetting beliefs to D")
            self.count("time_jump_resets")
            self.loop.restart_time_line()

    def reset(self, k: Optional[int] = None) -> str:
        """Agent ``k`` (every agent when None: the node's ``~/reset``) back to D, its True belief events False (each
        published, stamped with the node clock); the answer to give."""
        with self.lock:
            self.loop.reset(k)
            stochastic = self.loop.policy is not None and self.loop.policy.plan.stochastic
            cleared = self.events.reset(k, self._clock_ns())
        for j, event in cleared:
            self._publish_events(j, [event])
        if k is None:
            self.count("resets")
            return "beliefs reset to D; VMP/MMP window cleared" + ("; policy.seed's stream restarted" if stochastic
                                                                    else "")
        prefix = self.agent_prefix(k)
        self.count(f"{prefix}resets")
        return f"{prefix.rstrip('/')}: beliefs reset to D; VMP/MMP window cleared"

    # ---- the tick ---------------------------------------------------------------------------------------
    def tick(self) -> None:
        """Step every agent that is ready in one engine call and publish each one's beliefs."""
        with self.lock:
            t_start = time.perf_counter()
            loop = self.loop
            if not self.active or loop is None:
                return
            self._handle_reset_request()
            now_ns = self._clock_ns()
            jump = loop.clock_jump(now_ns)
            if jump:
                self._reset_request = jump
                self._handle_reset_request()
                loop.clock_jump(now_ns)  # the reset forgot the clock: this tick's is the reference
            settings = self.settings
            agents = loop.ready(settings.event_mode, self.now_s(now_ns), settings.observation_timeout,
                                settings.tick_without_observations)
            if not agents:
                self.count("idle_ticks")
                return
            self.report_silence(now_ns)
            try:
                outs = loop.step(now_ns, agents, self.now_s(now_ns))
            except Exception as exc:  # noqa: BLE001 - a tick must never take the node down
                self.count("tick_errors")
                self.reporter.warn_throttled("tick_error", f"tick failed: {type(exc).__name__}: {exc}")
                return
            for k, out in outs:
                if out.evidence is not None:
                    for refused in out.evidence.reports:  # readings past their surprise gate
                        self.reporter.admission(refused, self.agent_prefix(k))
                self._publish(k, out, self.deployment, loop)
                self._step_events(k, out)
            loop.record(outs, t_start)

    def _step_events(self, k: int, out: TickOutput) -> None:
        """Agent ``k``'s belief events after its step ``out``: those that fired are counted, logged and published."""
        fired = self.events.step(k, out.posterior, out.stamp_ns)
        if not fired:
            return
        prefix = self.agent_prefix(k)
        for event in fired:
            self.count(f"{prefix}events.{event.name}.{'true' if event.value else 'false'}")
            self._log.info(f"event {prefix}{event.name}: {event.value} (p = {event.probability:.3f}, crossed at "
                           f"{event.stamp_ns * 1e-9:.3f} s)")
        self._publish_events(k, fired)

    def silence_check(self) -> None:
        """Report modalities gone silent; in event mode, tick when one went silent while the others wait."""
        with self.lock:
            if self.loop is None or not self.active:
                return
            now_ns = self._clock_ns()
            self.report_silence(now_ns)
            if self.settings.event_mode and self.loop.ready(True, self.now_s(now_ns),
                                                            self.settings.observation_timeout, False):
                self.tick()

    def report_silence(self, now_ns: Optional[int] = None) -> None:
        """Log each modality that went silent, once (its next accepted message clears it)."""
        for line in self.loop.silence_warnings(self.now_s(now_ns), self.settings.observation_timeout):
            self._log.warning(line)
