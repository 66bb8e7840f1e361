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

from .admission import Inputs
from .controls import ControlTimeline, fill_window_actions
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
        self.inputs = Inputs([model.modality_name(i) for i in range(model.num_modalities)], model.num_obs)
        self.controls = ControlTimeline(model.num_factors)
        self.filter = BeliefFilter(engine, model.D, horizon, has_B=model.B is not None)
        self.stats = TickStatistics()
        self._last_clock_ns: Optional[int] = None

    def reset(self) -> None:
        """Beliefs back to D, the window and pending observations cleared (controls are kept)."""
        self.filter.reset()
        self.inputs.reset()
        self._last_clock_ns = None

    def clock_jump(self, now_ns: int) -> Optional[str]:
        """The reason to reset when the node clock went back since the last tick (None otherwise)."""
        last, self._last_clock_ns = self._last_clock_ns, now_ns
        if last is not None and now_ns < last:
            return f"clock jumped backwards by {(last - now_ns) * 1e-9:.3f} s"
        return None

    def step(self, now_ns: int) -> TickOutput:
        """Use the fresh observations (uniform for a modality without one) for one step stamped with the newest of
        them (the node clock when none is stamped). Raises what the engine raises (the step stays in the window)."""
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
