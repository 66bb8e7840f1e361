"""One node's runtime without ROS: :class:`AgentRuntime` owns the tick lock, the tick loop of the node's agents, the
engine that runs (its :class:`~.builder.EngineSlot`), the engine host that builds engines (``engine_host.py``) and
the counters (``reporting.py``). The ROS node (``ros/agent_node.py``) wires its entities to it: each subscription,
timer and service callback is one call here, for agent ``k`` (``k = 0`` for a node's single agent).

One lock, one writer at a time: an admitted observation, a control, a tick, a reset and an engine swap each hold
:attr:`AgentRuntime.lock`; a swap waits for at most the tick in progress, and a tick never waits for a compile (builds
run in the host's worker thread). A backwards jump of the clock, seen in whichever thread moved it, is only flagged
(:meth:`AgentRuntime.request_reset`); the next observation or tick resets under the lock.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Optional, Sequence

from . import admission
from .builder import BuildCancelled, EngineSlot
from .engine_host import EngineHost
from .reporting import Reporter
from .surprise import settings_from_parameters
from .tick_loop import TickLoop, TickOutput, qualified

# publish(k, out, slot, loop): agent k's beliefs of one step, run by the engine of ``slot``
Publish = Callable[[int, TickOutput, EngineSlot, TickLoop], None]


class AgentRuntime:
    """``param(name)``: the node's parameter values; ``model_parameters()``: its ``model.*`` parameters; ``log``: its
    logger; ``clock_ns()``: the node clock (ns; 0 while sim time has no /clock); ``closed()``: True once the node is
    being destroyed; ``publish``: what a tick publishes for each agent that stepped; ``event_mode()``: ticks follow
    the observations (no tick timer)."""

    def __init__(self, param: Callable[[str], Any], model_parameters: Callable[[], dict], log: Any,
                 clock_ns: Callable[[], int], closed: Callable[[], bool], publish: Publish,
                 event_mode: Callable[[], bool]):
        self.lock = threading.RLock()
        self.reporter = Reporter(log, closed)
        self.count = self.reporter.count
        self.host = EngineHost(param, model_parameters, log, self.count, closed)
        self._param, self._log, self._clock_ns, self._publish, self.event_mode = param, log, clock_ns, publish, event_mode
        self.loop: Optional[TickLoop] = None
        self.slot: Optional[EngineSlot] = None  # the engine that runs
        self.active = False
        self._reset_request: Optional[str] = None

    @property
    def configured(self) -> bool:
        return self.loop is not None

    @property
    def device(self) -> str:
        """Where the running engine's calls run (``cpu:0``, ``gpu:0``; "" before configure)."""
        return self.slot.device if self.slot is not None else ""

    def agent_prefix(self, k: int) -> str:
        """Agent ``k``'s prefix of counters and topics: ``<agent>/``, or "" for a node's single agent."""
        return qualified(self.loop.agents[k], "") if self.loop is not None else ""

    # ---- lifecycle ------------------------------------------------------------------------------------
    def configure(self, agents: Sequence[str], period_s: float, keep_waiting: Callable[[], bool],
                  on_failed: Callable[[dict[str, Any]], None],
                  check_model: Callable[[Any], None] = lambda model: None,
                  surprise: Optional[dict[str, Any]] = None) -> EngineSlot:
        """Load the model, ``check_model(model)`` (the sensor adapters: it raises to refuse, before any build) and
        build its first engine for ``agents`` (empty: one agent) in the host's worker, waiting as
        :meth:`EngineHost.configure` does; then accept rebuilds (``on_failed(back)``: after the newest one failed,
        the engine parameters to put back). ``surprise``: the ``surprise_gate.*`` / ``surprise_threshold.*``
        parameters (with ``evidence`` on), checked against the model before any build too (ValueError naming a
        parameter that names no modality of the model or is not a positive number). Raises what the build or a
        check raised."""
        self.host.agents = list(agents)
        settings = []

        def check(model: Any) -> None:
            check_model(model)
            if bool(self._param("evidence")):
                settings.append(settings_from_parameters(
                    surprise or {}, [model.modality_name(i) for i in range(model.num_modalities)],
                    int(self._param("surprise_warn_ticks")), int(self._param("surprise_window"))))

        slot = self.host.configure(period_s, keep_waiting, check)
        model = self.host.model
        with self.lock:
            self.loop = TickLoop(model, slot.engine, slot.config.horizon, agents, settings[0] if settings else None)
            self.slot = slot
        self.host.start(self._install, lambda: self.slot, on_failed)
        return slot

    def activate(self) -> None:
        with self.lock:
            self.active = True
            if self.loop is not None:
                self.loop.heard_now(time.monotonic())

    def deactivate(self) -> None:
        with self.lock:
            self.active = False

    def cleanup(self, reason: str) -> None:
        """Stop ticking, cancel builds (their waiters get ``reason``) and drop the model and the engine."""
        self.host.close(reason)
        with self.lock:
            self.active = False
            self.loop = self.slot = None

    def _install(self, slot: EngineSlot) -> None:
        """The host's finished build: swapped in atomically (the next tick runs it)."""
        with self.lock:
            if self.loop is None:
                raise BuildCancelled("the node was cleaned up before the new engine was ready")
            self.loop.filter.swap(slot.engine, slot.config.horizon)
            self.slot = slot

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
            now = time.monotonic()
            inputs = loop.agent_inputs[k]
            mod = inputs.arrived(i, now)
            if not self.active:
                self.count("ignored_inactive")
                return
            self._handle_reset_request()
            timeout = float(self._param("observation_timeout"))
            got = inputs.observe(i, level, probabilities, sec, nanosec, now=now, now_ns=self._clock_ns(),
                                 arrival=arrival, timeout_s=timeout, max_future_s=float(self._param("max_future_stamp")),
                                 **judge)
            self.reporter.admission(admission.report(mod.name, got, mod.topic), self.agent_prefix(k))
            if got.ok and self.event_mode() and inputs.event_ready(now, timeout):
                self.tick()

    def control(self, k: int, indices: Any, labels: Any, sec: int, nanosec: int) -> None:
        """Add one ``Controls`` message to agent ``k``'s timeline, or count and log why it was dropped."""
        with self.lock:
            loop = self.loop
            if loop is None:
                return
            reason = loop.add_control(k, indices, labels, sec, nanosec, self._clock_ns(),
                                      float(self._param("max_future_stamp")))
        prefix = self.agent_prefix(k)
        if reason is not None:
            self.count(f"{prefix}rejected.bad_control")
            self.reporter.warn_throttled((f"{prefix}controls", "bad_control"),
                                         f"{prefix}controls: dropped (bad_control): {reason}")
            return
        self.count(f"{prefix}controls")

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
        """Agent ``k`` (every agent when None: the node's ``~/reset``) back to D; the answer to give."""
        with self.lock:
            self.loop.reset(k)
        if k is None:
            self.count("resets")
            return "beliefs reset to D; VMP/MMP window cleared"
        prefix = self.agent_prefix(k)
        self.count(f"{prefix}resets")
        return f"{prefix.rstrip('/')}: beliefs reset to D; VMP/MMP window cleared"

    # ---- the tick ---------------------------------------------------------------------------------------
    def tick(self) -> None:
        """Step every agent that is ready in one engine dispatch and publish each one's beliefs."""
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
            agents = loop.ready(self.event_mode(), time.monotonic(), float(self._param("observation_timeout")),
                                bool(self._param("tick_without_observations")))
            if not agents:
                self.count("idle_ticks")
                return
            self.report_silence()
            try:
                outs = loop.step(now_ns, agents)
            except Exception as exc:  # noqa: BLE001 - a tick must never take the node down
                self.count("tick_errors")
                self.reporter.warn_throttled("tick_error", f"tick failed: {type(exc).__name__}: {exc}")
                return
            for k, out in outs:
                if out.evidence is not None:
                    for refused in out.evidence.reports:  # readings past their surprise gate
                        self.reporter.admission(refused, self.agent_prefix(k))
                self._publish(k, out, self.slot, loop)
            loop.record(outs, t_start)

    def silence_check(self) -> None:
        """Report modalities gone silent; in event mode, tick when one went silent while the others wait."""
        with self.lock:
            if self.loop is None or not self.active:
                return
            self.report_silence()
            if self.event_mode() and self.loop.ready(True, time.monotonic(), float(self._param("observation_timeout")),
                                                     False):
                self.tick()

    def report_silence(self) -> None:
        """Log each modality that went silent, once (its next accepted message clears it)."""
        for line in self.loop.silence_warnings(time.monotonic(), float(self._param("observation_timeout"))):
            self._log.warning(line)
