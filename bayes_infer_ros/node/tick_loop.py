"""One configured node's tick, without ROS: the inputs it admits (:class:`~.admission.Inputs`), the controls
timeline, the belief filter (the tick's semantics, ``inference/belief_filter.py``) and the tick statistics.

The node calls :meth:`TickLoop.step` under its tick lock and publishes what it returns. Controls are looked up
by the step's stamp (the control in effect just before the step); for vmp/mmp, controls that arrive late are
written onto their own transition in the window.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from bayes_infer_ros.inference.belief_filter import BeliefFilter

from .admission import Inputs, admit_stamp
from .controls import ControlTimeline, check_controls, fill_window_actions
from .statistics import TickStatistics


@dataclass(frozen=True)
class TickOutput:
    """A tick's beliefs (S,) float32, the stamp of the step (ns), and the newest arrival it used (perf_counter)."""

    posterior: np.ndarray
    stamp_ns: int
    inference_s: float
    last_arrival: Optional[float]


class TickLoop:
    """``model``: the configured model; ``engine`` and ``horizon``: the active engine's."""

    def __init__(self, model: Any, engine: Any, horizon: int):
        self.inputs = Inputs([model.modality_name(i) for i in range(model.num_modalities)], model.num_obs,
                             [model.observation_label_list(i) for i in range(model.num_modalities)])
        self.controls = ControlTimeline(model.num_factors)
        self.filter = BeliefFilter(engine, model.D, horizon, has_B=model.B is not None)
        self.stats = TickStatistics()
        self.factor_names = [model.factor_name(f) for f in range(model.num_factors)]
        self.state_labels = [[str(x) for x in model.state_label_list(f)] for f in range(model.num_factors)]
        self._num_controls, self._control_labels = tuple(int(u) for u in model.num_controls), model.control_labels
        self._last_clock_ns: Optional[int] = None

    def add_control(self, indices: Any, labels: Any, sec: int, nanosec: int, now_ns: int,
                    max_future_s: float = 0.5) -> Optional[str]:
        """Add one ``Controls`` message to the timeline, stamped with its header (``now_ns``, the node clock, when
        unstamped); the reason when it is refused (nothing added). The header is judged as an observation's is
        (``admission.admit_stamp``): not a time, or more than ``max_future_s`` ahead of the node clock, is
        refused."""
        control, reason = check_controls(indices, labels, self._num_controls, self._control_labels)
        if control is None:
            return reason
        decision = admit_stamp(sec, nanosec, last_ns=-1, now_ns=now_ns, timeout_s=0.0, max_future_s=max_future_s)
        if not decision.ok:
            return decision.detail
        self.controls.add(decision.stamp_ns, control)
        return None

    def reset(self) -> None:
        """Beliefs back to D, the window and pending observations cleared (controls are kept)."""
        self.filter.reset()
        self.inputs.reset()
        self._last_clock_ns = None

    def restart_time_line(self) -> None:
        """After the clock went back: :meth:`reset`, and the controls forgotten (stamped on the old time line)."""
        self.reset()
        self.controls.clear()

    def clock_jump(self, now_ns: int) -> Optional[str]:
        """The reason to reset when the node clock went back since the last tick (None otherwise)."""
        last, self._last_clock_ns = self._last_clock_ns, now_ns
        if last is not None and now_ns < last:
            return f"clock jumped backwards by {(last - now_ns) * 1e-9:.3f} s"
        return None

    def record(self, out: TickOutput, started: float) -> None:
        """The statistics of step ``out``, published now (``started``: perf_counter when its tick began)."""
        done = time.perf_counter()
        self.stats.record(done - started, out.inference_s, None if out.last_arrival is None else done - out.last_arrival)

    def step(self, now_ns: int) -> TickOutput:
        """Use the fresh observations for one step stamped with the newest of them (the node clock when none is
        stamped). A modality without one is no evidence: its part of the row is all zero, which adds nothing to
        pymdp's likelihood (``inference/belief_filter.py``). Raises what the engine raises (the step stays in
        the window)."""
        row, newest_stamp, last_arrival = self.inputs.take()
        stamp = newest_stamp if newest_stamp > 0 else now_ns
        action = self.controls.at(stamp)
        window = self.filter.window
        self.filter.record(row, action, stamp)
        if self.filter.algorithm != "fpi":
            fill_window_actions(window.actions, window.stamps, window.valid_steps, self.controls)
            self.controls.forget_before(int(window.stamps[window.horizon - window.valid_steps]))
        else:
            self.controls.forget_before(stamp)
        t0 = time.perf_counter()
        # fpi with B: one dispatch, beliefs and the next step's prior under the newest controls
        posterior = self.filter.infer(action, self.controls.latest())
        self.stats.ticks += 1
        return TickOutput(posterior, stamp, time.perf_counter() - t0, last_arrival)
