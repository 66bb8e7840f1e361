"""rclpy differences between the supported distros (Humble, Jazzy, Kilted), feature-detected.

``Node.add_post_set_parameters_callback`` exists from rclpy 3.7 (Iron) on. Humble's rclpy has only the on-set
callback, which runs *before* the new values are stored. There, :class:`DeferredPostSet` queues each accepted
change and runs the post-set callback once the values are in: from a one-shot timer on the steady clock (so
sim time without ``/clock`` cannot hold it up), or at once when the node's own code calls :meth:`flush` right
after its ``set_parameters``. The post-set callback sees only values that were stored: a queued change whose values
are not the node's yet is kept for ``STORE_WAIT_S`` (the set that queued it may still be storing them on another
thread) and then dropped (another on-set callback refused it, or a newer change replaced it).

The table of every rclpy API the node uses, with the first distro that has it: the lab's ``rclpy_api.py``.
"""
from __future__ import annotations

import math
import threading
import time
from typing import Any, Callable

from rcl_interfaces.msg import SetParametersResult
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.parameter import Parameter

OnSet = Callable[[list], SetParametersResult]
PostSet = Callable[[list], None]

STORE_WAIT_S = 0.5


def has_post_set_callbacks(node: Node) -> bool:
    """True on Iron and later (rclpy >= 3.7), where ``Node.add_post_set_parameters_callback`` exists."""
    return callable(getattr(node, "add_post_set_parameters_callback", None))


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a).__name__ == "array" or isinstance(a, (list, tuple)):
        return list(a) == list(b) if (type(b).__name__ == "array" or isinstance(b, (list, tuple))) else False
    return a == b


class DeferredPostSet:
    """The post-set callback for an rclpy without one (Humble): queued by the on-set path, run once stored."""

    def __init__(self, node: Node, post_set: PostSet):
        self._node = node
        self._post_set = post_set
        self._lock = threading.Lock()
        self._queue: list[tuple[float, list[Parameter]]] = []  # (drop-after deadline, the change)
        # One timer for the node's lifetime, armed by queue() and disarmed by its first call.
        self._timer = node.create_timer(0.001, self.flush, clock=Clock(clock_type=ClockType.STEADY_TIME))
        self._timer.cancel()

    def queue(self, params: list[Parameter]) -> None:
        with self._lock:
            self._queue.append((time.monotonic() + STORE_WAIT_S, list(params)))
        self._timer.reset()

    def _stored(self, params: list[Parameter]) -> bool:
        for p in params:
            if not self._node.has_parameter(p.name):
                return False
            if not _same_value(self._node.get_parameter(p.name).value, p.value):
                return False
        return True

    def flush(self) -> None:
        """Run the post-set callback for every queued change whose values are stored. Any thread."""
        self._timer.cancel()
        with self._lock:
            pending, self._queue = self._queue, []
        waiting = []
        for deadline, params in pending:
            if self._stored(params):
                self._post_set(params)
            elif time.monotonic() < deadline:
                waiting.append((deadline, params))
        if waiting:
            with self._lock:
                self._queue[:0] = waiting
            self._timer.reset()


def add_parameter_callbacks(node: Node, on_set: OnSet, post_set: PostSet) -> Callable[[], None]:
    """Register the on-set and post-set parameter callbacks on any supported distro.

    Returns the function the node calls after its own ``set_parameters`` so that their effects are in place when
    they return, on every distro: nothing to do where rclpy has post-set callbacks (Iron and later); on Humble,
    the :class:`DeferredPostSet`'s ``flush``.
    """
    if has_post_set_callbacks(node):
        node.add_on_set_parameters_callback(on_set)
        node.add_post_set_parameters_callback(post_set)
        return lambda: None
    deferred = DeferredPostSet(node, post_set)

    def on_set_then_queue(params: list[Parameter]) -> SetParametersResult:
        result = on_set(params)
        if result.successful:
            deferred.queue(params)
        return result

    node.add_on_set_parameters_callback(on_set_then_queue)
    node.get_logger().info("this rclpy has no add_post_set_parameters_callback (Humble): parameter changes are "
                           "applied by a deferred post-set step")
    return deferred.flush
