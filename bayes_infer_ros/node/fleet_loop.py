"""The tick of a node that serves several agents of one model, without ROS: :class:`~.tick_loop.TickLoop`'s
semantics per agent (its own inputs, controls timeline, window and beliefs) with one
:class:`~bayes_infer_ros.inference.batch_filter.BatchBeliefFilter` stepping every agent that has something new
in one batched engine call.

Agent ``k``'s modalities are admitted under the names ``<agent>/<modality>``, so the node's diagnostics list them
per agent (``input.<agent>/<modality>.rejected``) and a refused message of one agent is counted for it alone.
"""
from __future__ import annotations

import time
from typing import Any, Optional, Sequence

from bayes_infer_ros.inference.batch_filter import BatchBeliefFilter

from .admission import Inputs, admit_stamp
from .controls import ControlTimeline, check_controls, fill_window_actions
from .statistics import TickStatistics
from .tick_loop import TickOutput

class FleetLoop:
    """``model``: the configured model; ``engine``: built with one batch row per agent (``agents``)."""

    def __init__(self, model: Any, engine: Any, horizon: int, agents: Sequence[str]):
        self.agents = list(agents)
        names = [model.modality_name(i) for i in range(model.num_modalities)]
        self.agent_inputs = [Inputs([f"{a}/{n}" for n in names], model.num_obs) for a in self.agents]
        self.controls = [ControlTimeline(model.num_factors) for _ in self.agents]
        self.filter = BatchBeliefFilter(engine, model.D, horizon, has_B=model.B is not None)
        self.stats = TickStatistics()           # the node's batched ticks
        self.ticks = [0] * len(self.agents)     # steps per agent (each agent's Beliefs.tick)
        self.modality_names = names
        self.factor_names = [model.factor_name(f) for f in range(model.num_factors)]
        self.state_labels = [[str(x) for x in model.state_label_list(f)] for f in range(model.num_factors)]
        self._num_controls, self._control_labels = tuple(int(u) for u in model.num_controls), model.control_labels
        self._last_clock_ns: Optional[int] = None
        # every agent's modalities in one Inputs: the node's diagnostics, silence reports and activation
        self.inputs = Inputs([], [])
        self.inputs.modalities = [m for inputs in self.agent_inputs for m in inputs.modalities]

    def add_control(self, k: int, indices: Any, labels: Any, sec: int, nanosec: int, now_ns: int,
                    max_future_s: float = 0.5) -> Optional[str]:
        """Add one ``Controls`` message to agent ``k``'s timeline; the reason when it is refused (nothing added).
        The header is judged as :meth:`TickLoop.add_control <.tick_loop.TickLoop.add_control>` judges it."""
        control, reason = check_controls(indices, labels, self._num_controls, self._control_labels)
        if control is None:
            return reason
        decision = admit_stamp(sec, nanosec, last_ns=-1, now_ns=now_ns, timeout_s=0.0, max_future_s=max_future_s)
        if not decision.ok:
            return decision.detail
        self.controls[k].add(decision.stamp_ns, control)
        return None

    def reset(self, k: Optional[int] = None) -> None:
        """Agent ``k`` (every agent when None) back to D, its window and pending observations cleared."""
        self.filter.reset(k)
        for j in range(len(self.agents)) if k is None else (k,):
            self.agent_inputs[j].reset()
        if k is None:
            self._last_clock_ns = None

    def restart_time_line(self) -> None:
        """After the clock went back: every agent reset, every controls timeline forgotten."""
        self.reset()
        for timeline in self.controls:
            timeline.clear()

    def clock_jump(self, now_ns: int) -> Optional[str]:
        """The reason to reset when the node clock went back since the last tick (None otherwise)."""
        last, self._last_clock_ns = self._last_clock_ns, now_ns
        if last is not None and now_ns < last:
            return f"clock jumped backwards by {(last - now_ns) * 1e-9:.3f} s"
        return None

    def ready(self, event_mode: bool, now: float, timeout_s: float, without_observations: bool) -> list[int]:
        """The agents that step in this tick: event mode, those whose inputs are event-ready; timer mode, those
        with a new observation (every agent with ``without_observations``)."""
        if event_mode:
            return [k for k, inputs in enumerate(self.agent_inputs) if inputs.event_ready(now, timeout_s)]
        return [k for k, inputs in enumerate(self.agent_inputs) if without_observations or inputs.any_fresh]

    def step(self, now_ns: int, agents: Sequence[int]) -> list[tuple[int, TickOutput]]:
        """One step of each of ``agents`` (their fresh observations; a modality without one is all zero: no evidence), all in
        one batched engine call. Raises what the engine raises (the steps stay in the windows)."""
        stamps, arrivals, actions, upcoming = {}, {}, {}, {}
        for k in agents:
            row, newest_stamp, arrivals[k] = self.agent_inputs[k].take()
            stamps[k] = stamp = newest_stamp if newest_stamp > 0 else now_ns
            timeline = self.controls[k]
            actions[k] = timeline.at(stamp)
            self.filter.record(k, row, actions[k], stamp)
            window = self.filter.windows[k]
            if self.filter.algorithm != "fpi":
                fill_window_actions(window.actions, window.stamps, window.valid_steps, timeline)
                timeline.forget_before(int(window.stamps[window.horizon - window.valid_steps]))
            else:
                timeline.forget_before(stamp)
            upcoming[k] = timeline.latest()
        t0 = time.perf_counter()
        posteriors = self.filter.infer(list(agents), actions, upcoming)
        inference_s = time.perf_counter() - t0
        out = []
        for k in agents:
            self.ticks[k] += 1
            out.append((k, TickOutput(posteriors[k], stamps[k], inference_s, arrivals[k])))
        self.stats.ticks += 1
        return out

    def record(self, outs: Sequence[tuple[int, TickOutput]], started: float) -> None:
        """The statistics of one batched tick (``started``: perf_counter when it began)."""
        if not outs:
            return
        done = time.perf_counter()
        arrivals = [o.last_arrival for _, o in outs if o.last_arrival is not None]
        self.stats.record(done - started, outs[0][1].inference_s, done - max(arrivals) if arrivals else None)

