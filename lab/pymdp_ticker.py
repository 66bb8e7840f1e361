"""pymdp's jitted FPI call as a hand-written rclpy node would make it: once per step of a played bag, in a
subscription callback, timed around the call alone. The speed gate sets it beside the node's own ``inference_ms``
(the tick's engine call), both fed the same messages at the same cadence, so that the two calls run equally cold.

Only the timing is kept: the observations are the step's levels one-hot (soft evidence, labels and refusals are
the node's business) and the prior is the model's D each step (pymdp's call costs the same for any input).
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

import numpy as np
import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import qos_profile_sensor_data

from bayes_infer_ros.autotune.timing import block
from bayes_infer_ros.ros.spinning import SpinThread, stop_spinning


class PymdpTicker:
    """Subscribes to ``/observations/<modality>`` of ``model`` (no namespace) in a private context; when every
    modality has a message with one stamp, calls ``call(obs)`` (obs: per modality one-hot (num_obs[m],)) and keeps
    its wall time in ``times_s``. ``with PymdpTicker(model, call): ...`` spins it for the block."""

    def __init__(self, model: Any, call: Callable[[list], Any]):
        self.model = model
        self.call = call
        self.times_s: list[float] = []
        self._pending: dict[int, dict[int, int]] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> "PymdpTicker":
        from bayes_infer_ros.msg import CategoricalObservation

        self.context = Context()
        rclpy.init(args=[], context=self.context)
        self.node = rclpy.create_node("pymdp_ticker", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        for m in range(self.model.num_modalities):
            self.node.create_subscription(CategoricalObservation, f"/observations/{self.model.modality_name(m)}",
                                          lambda msg, m=m: self._on_observation(m, msg), qos_profile_sensor_data)
        self._spin = SpinThread(self.executor, name="pymdp_ticker")
        return self

    def __exit__(self, *exc) -> None:
        stop_spinning(self.executor, self._spin, self.node, self.context)

    def _on_observation(self, m: int, msg: Any) -> None:
        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        with self._lock:
            step = self._pending.setdefault(stamp, {})
            step[m] = int(msg.level)
            if len(step) < self.model.num_modalities:
                return
            del self._pending[stamp]
        obs = [np.eye(n, dtype=np.float32)[min(max(step[i], 0), n - 1)] for i, n in enumerate(self.model.num_obs)]
        t0 = time.perf_counter()
        block(self.call(obs))
        self.times_s.append(time.perf_counter() - t0)


def pymdp_fpi_call(model: Any) -> Callable[[list], Any]:
    """pymdp 1.0.4's FPI (16 iterations) under ``jax.jit`` on ``model``'s A, float32, from the prior D: a callable of
    the per-modality observations (numpy, handed to the jitted call as they are), compiled and warm."""
    import jax.numpy as jnp

    from lab.harness import pymdp_callable

    fn = pymdp_callable("fpi", model.A_dependencies, model.B_dependencies, 16, 1.0)
    A = [jnp.asarray(a, jnp.float32) for a in model.A]
    prior = [jnp.asarray(d, jnp.float32) for d in model.D]

    def call(obs: list) -> Any:
        return fn(A, obs, prior)

    first = [np.eye(n, dtype=np.float32)[0] for n in model.num_obs]
    for _ in range(3):
        block(call(first))
    return call
