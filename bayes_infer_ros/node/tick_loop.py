"""One configured node's tick for its agents, without ROS: the inputs each agent admits
(:class:`~.admission.Inputs`), its controls timeline, the belief filter that steps them all
(``inference/belief_filter.py``: one engine dispatch per tick) and the tick statistics.

A node serves ``b`` agents of one model, ``b = 1`` by default: the single agent is named ``""`` and its modalities
by their own names; with ``agents: [a, ...]`` agent ``a``'s modalities are named ``a/<modality>`` (diagnostics list
them so, and a refused message of one agent is counted for it alone). Everything else is the same for one agent or
many.

The runtime (``runtime.py``) calls :meth:`TickLoop.step` under its tick lock and publishes what it returns. Controls
are looked up by the step's stamp (the control in effect just before the step); for vmp/mmp, controls that arrive
late are written onto their own transition in the window.

**Evidence** (``surprise`` settings given): each step also gives each reading's surprise and the free energy of the
beliefs (``BeliefFilter.set_evidence``); a reading past its modality's gate is refused there, before it enters the
step, and counted here as a refused input of its modality (``outlier``); each agent's :class:`~.surprise.SurpriseMonitor`
keeps the statistics and the warnings /diagnostics shows.

**Policy inference** (a :class:`~.policy_stage.PolicyStage` given): after the beliefs, the stepping agents' policy
step in one call (its own timing, apart from the engine call's); with ``policy.publish_controls`` each agent's chosen
control goes onto its controls timeline stamped at its step, as a ``Controls`` message stamped then would: the next
step's control, unless a message stamped later (on ``controls``) takes over. ``reset()`` of every agent restarts
``policy.seed``'s stream.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np

from bayes_infer_ros.inference.belief_filter import BeliefFilter

from .admission import AdmissionReport, Inputs, ModalityState, admit_stamp, report
from .control_feeds import unstamped_control_ns
from .controls import ControlTimeline, check_controls, fill_window_actions
from .policy_stage import PolicyStage, PolicyStep
from .statistics import TickStatistics
from .surprise import ModalitySurprise, SurpriseMonitor, SurpriseSettings


@dataclass(frozen=True)
class TickEvidence:
    """One agent's step: the free energy of its beliefs (nats; vmp/mmp: the window's), each reading's surprise (M,)
    float32 (0 without a reading), the readings refused as outliers (M,) bool, and the admission reports of those
    refusals (what the runtime counts and logs)."""

    free_energy: float
    surprise: np.ndarray
    outliers: np.ndarray
    reports: tuple[AdmissionReport, ...] = ()


@dataclass(frozen=True)
class TickOutput:
    """One agent's step: its beliefs (S,), the stamp of the step (ns), the seconds the engine call took, the newest
    arrival it used (perf_counter; None when none), its evidence and its policy step (None when not computed)."""

    posterior: np.ndarray
    stamp_ns: int
    inference_s: float
    last_arrival: Optional[float]
    evidence: Optional[TickEvidence] = None
    policy: Optional[PolicyStep] = None


def qualified(agent: str, name: str) -> str:
    """``name`` (a modality, a counter) of ``agent``: ``agent/name``, or ``name`` for the single agent ("")."""
    return f"{agent}/{name}" if agent else name


class TickLoop:
    """``model``: the configured model; ``engine`` and ``horizon``: the active engine's (batched with one row per
    agent when there are several); ``agents``: their names (empty: one agent, named ""); ``surprise``: the gates,
    thresholds and windows of the evidence (None: no evidence); ``policy``: the agents' policy inference (None:
    none)."""

    def __init__(self, model: Any, engine: Any, horizon: int, agents: Sequence[str] = (),
                 surprise: Optional[SurpriseSettings] = None, policy: Optional[PolicyStage] = None):
        self.agents = list(agents) or [""]
        self.modality_names = [model.modality_name(i) for i in range(model.num_modalities)]
        labels = [model.observation_label_list(i) for i in range(model.num_modalities)]
        self.agent_inputs = [Inputs([qualified(a, n) for n in self.modality_names], model.num_obs, labels,
                                    [qualified(a, f"observations/{n}") for n in self.modality_names])
                             for a in self.agents]
        self.controls = [ControlTimeline(model.num_factors) for _ in self.agents]
        self.adapter_factors = np.zeros(model.num_factors, bool)  # fed by a control adapter (control_feeds.py)
        self.last_step_ns: list[Optional[int]] = [None] * len(self.agents)  # each agent's newest step's stamp
        self.filter = BeliefFilter(engine, model.D, horizon, has_B=model.B is not None, dtype=engine.dtype)
        self.stats = TickStatistics()             # the node's ticks (each one engine dispatch)
        self.ticks = [0] * len(self.agents)       # steps per agent (each agent's Beliefs.tick)
        self.factor_names = [model.factor_name(f) for f in range(model.num_factors)]
        self.state_labels = [[str(x) for x in model.state_label_list(f)] for f in range(model.num_factors)]
        self._num_controls, self._control_labels = tuple(int(u) for u in model.num_controls), model.control_labels
        #: each factor's control names: the model's labels, else the indices as text
        self.control_names = [[str(x) for x in model.control_labels[f]] if model.control_labels
                              else [str(u) for u in range(n)] for f, n in enumerate(self._num_controls)]
        self.policy = policy
        self._last_clock_ns: Optional[int] = None
        self._obs_offsets = np.asarray(self.filter.engine.layout.obs_offsets[:-1])
        self.monitors: list[SurpriseMonitor] = []
        if surprise is not None:
            self.monitors = [SurpriseMonitor(self.modality_names, surprise, engine.dtype) for _ in self.agents]
            self.filter.set_evidence(True, self.monitors[0].gates)

    @property
    def evidence(self) -> bool:
        """Each step computes its evidence (surprise, free energy, the gates)."""
        return bool(self.monitors)

    def surprise_statistics(self) -> list[tuple[str, str, ModalitySurprise]]:
        """Every agent's modalities: (name as diagnostics list it, the topic it arrives on, its statistics)."""
        return [(mod.name, mod.topic, stats) for inputs, monitor in zip(self.agent_inputs, self.monitors)
                for mod, stats in zip(inputs.modalities, monitor.statistics())]

    # ---- every agent's inputs, for diagnostics and silence ----------------------------------------------
    @property
    def modalities(self) -> list[ModalityState]:
        """Every agent's modalities, agent by agent."""
        return [m for inputs in self.agent_inputs for m in inputs.modalities]

    def rejecting(self, now: float) -> dict[str, str]:
        """Modality -> the reason its newest message was refused, for those being rejected now."""
        return {name: reason for inputs in self.agent_inputs for name, reason in inputs.rejecting(now).items()}

    def silence_warnings(self, now: float, timeout_s: float) -> list[str]:
        return [line for inputs in self.agent_inputs for line in inputs.silence_warnings(now, timeout_s)]

    def heard_now(self, now: float) -> None:
        """Start every modality's timeout afresh (activation)."""
        for inputs in self.agent_inputs:
            inputs.heard_now(now)

    # ---- controls, resets, the clock --------------------------------------------------------------------
    def add_control(self, k: int, indices: Any, labels: Any, sec: int, nanosec: int, now_ns: int,
                    max_future_s: float = 0.5) -> Optional[str]:
        """Add one ``Controls`` message to agent ``k``'s timeline, stamped with its header (unstamped: just after the
        agent's newest step, or ``now_ns``, the node clock, before its first: ``control_feeds.unstamped_control_ns``);
        the reason when it is refused (nothing added). The header is judged as an observation's is
        (``admission.admit_stamp``): not a time, or more than ``max_future_s`` ahead of the node clock, is refused. The
        factors a control adapter feeds keep the adapter's controls (``adapter_factors``)."""
        control, reason = check_controls(indices, labels, self._num_controls, self._control_labels)
        if control is None:
            return reason
        decision = admit_stamp(sec, nanosec, last_ns=-1, now_ns=now_ns, timeout_s=0.0, max_future_s=max_future_s)
        if not decision.ok:
            return decision.detail
        stamp = unstamped_control_ns(now_ns, self.last_step_ns[k]) if decision.unstamped else decision.stamp_ns
        self.controls[k].add(stamp, control, ~self.adapter_factors if self.adapter_factors.any() else None)
        return None

    def add_factor_control(self, k: int, f: int, control: int, sec: int, nanosec: int, now_ns: int,
                           max_future_s: float = 0.5) -> Optional[tuple[str, str]]:
        """Agent ``k``'s control ``control`` of factor ``f`` from its control adapter, stamped ``sec.nanosec`` ((0, 0):
        unstamped, as in :meth:`add_control`), the other factors kept; (reason, detail) when the stamp is refused
        (nothing added)."""
        decision = admit_stamp(sec, nanosec, last_ns=-1, now_ns=now_ns, timeout_s=0.0, max_future_s=max_future_s)
        if not decision.ok:
            return str(decision.reason), decision.detail
        stamp = unstamped_control_ns(now_ns, self.last_step_ns[k]) if decision.unstamped else decision.stamp_ns
        value = np.zeros(len(self._num_controls), np.int32)
        value[f] = control
        self.controls[k].add(stamp, value, np.arange(len(self._num_controls)) == f)
        return None

    def reset(self, k: Optional[int] = None) -> None:
        """Agent ``k`` (every agent when None) back to D, its window and pending observations cleared, its surprise
        statistics forgotten (controls and counters are kept)."""
        self.filter.reset(k)
        for j in range(len(self.agents)) if k is None else (k,):
            self.agent_inputs[j].reset()
            if self.monitors:
                self.monitors[j].reset()
        if k is None:
            self._last_clock_ns = None
            if self.policy is not None:
                self.policy.reset()

    def restart_time_line(self) -> None:
        """After the clock went back: every agent reset, every controls timeline forgotten (stamped on the old
        time line)."""
        self.reset()
        for timeline in self.controls:
            timeline.clear()
        self.last_step_ns = [None] * len(self.agents)

    def clock_jump(self, now_ns: int) -> Optional[str]:
        """The reason to reset when the node clock went back since the last tick (None otherwise)."""
        last, self._last_clock_ns = self._last_clock_ns, now_ns
        if last is not None and now_ns < last:
            return f"clock jumped backwards by {(last - now_ns) * 1e-9:.3f} s"
        return None

    # ---- the step ------------------------------------------------------------------------------------------
    def ready(self, event_mode: bool, now: float, timeout_s: float, without_observations: bool) -> list[int]:
        """The agents that step in this tick: in event mode, those whose inputs are event-ready; with a timer,
        those with a new observation (every agent with ``without_observations``)."""
        if event_mode:
            return [k for k, inputs in enumerate(self.agent_inputs) if inputs.event_ready(now, timeout_s)]
        return [k for k, inputs in enumerate(self.agent_inputs) if without_observations or inputs.any_fresh]

    def step(self, now_ns: int, agents: Sequence[int], now_s: Optional[float] = None) -> list[tuple[int, TickOutput]]:
        """One step of each of ``agents`` with its fresh observations (a modality without one is all zero: no
        evidence, ``inference/belief_filter.py``), stamped with the newest of them (the node clock when none is
        stamped), all in one engine dispatch. ``now_s``: seconds on the admission's clock (the runtime's ``now_s``;
        default ``now_ns``), when a reading is refused as an outlier. Raises what the engine raises (the steps stay in
        the windows)."""
        now_s = now_ns * 1e-9 if now_s is None else now_s
        stamps, arrivals, actions, upcoming, present = {}, {}, {}, {}, {}
        sequential = self.filter.spec.window
        for k in agents:
            row, newest_stamp, arrivals[k] = self.agent_inputs[k].take()
            if self.monitors:  # the modalities with a reading this step
                present[k] = np.add.reduceat(row, self._obs_offsets) > 0
            stamps[k] = stamp = newest_stamp if newest_stamp > 0 else now_ns
            self.last_step_ns[k] = stamp
            timeline = self.controls[k]
            actions[k] = timeline.at(stamp)
            self.filter.record(k, row, actions[k], stamp)
            if sequential:
                window = self.filter.windows[k]
                fill_window_actions(window.actions, window.stamps, window.valid_steps, timeline)
                timeline.forget_before(int(window.stamps[window.horizon - window.valid_steps]))
            else:
                timeline.forget_before(stamp)
            upcoming[k] = timeline.latest()
        t0 = time.perf_counter()
        # fpi with B: one dispatch, beliefs and the next step's prior under the newest controls
        posteriors = self.filter.infer(agents, actions, upcoming)
        inference_s = time.perf_counter() - t0
        policy = self.policy.run(posteriors) if self.policy is not None else {}
        out = []
        for k in agents:
            self.ticks[k] += 1
            evidence = self._evidence(k, present[k], stamps[k], now_s) if self.monitors else None
            step = policy.get(k)
            if step is not None and step.fed_back:  # as a Controls message stamped at this step
                self.controls[k].add(stamps[k], step.controls)
            out.append((k, TickOutput(posteriors[k], stamps[k], inference_s, arrivals[k], evidence, step)))
        self.stats.ticks += 1
        return out

    def _evidence(self, k: int, present: np.ndarray, stamp_ns: int, now_s: float) -> Optional[TickEvidence]:
        """Agent ``k``'s step's evidence (the step stamped ``stamp_ns``): recorded in its monitor, its refused readings
        counted as refused inputs of their modalities (``outlier``)."""
        ev = self.filter.evidence(k)
        if ev is None:
            return None
        monitor, inputs = self.monitors[k], self.agent_inputs[k]
        refused = monitor.record(ev.surprise, present, ev.refused, stamp_ns)
        reports = []
        for m in np.flatnonzero(refused):
            mod = inputs.modalities[m]
            got = inputs.refuse(int(m), now_s, "outlier",
                                f"surprise {float(ev.surprise[m]):.2f} nats is above its gate "
                                f"surprise_gate.{self.modality_names[m]} = {float(monitor.gates[m]):g}")
            reports.append(report(mod.name, got, mod.topic))
        return TickEvidence(float(ev.free_energy.total), np.asarray(ev.surprise, np.float32), refused, tuple(reports))

    def record(self, outs: Sequence[tuple[int, TickOutput]], started: float) -> None:
        """The statistics of one tick, published now (``started``: perf_counter when it began)."""
        if not outs:
            return
        done = time.perf_counter()
        arrivals = [o.last_arrival for _, o in outs if o.last_arrival is not None]
        first = outs[0][1]
        self.stats.record(done - started, first.inference_s, done - max(arrivals) if arrivals else None,
                          first.policy.seconds if first.policy is not None else None)
