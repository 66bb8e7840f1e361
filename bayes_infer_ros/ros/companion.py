"""A hidden companion node, spun by its own thread, for services whose callbacks wait on long work.

Why: the agent node runs on a ``SingleThreadedExecutor`` (rclpy's ``MultiThreadedExecutor`` re-queues tasks
that have not started yet and can spin the GIL at 100% CPU, ros2/rclpy#1452, fixed upstream only after Kilted;
on this machine it cut a lockstep replay from ~360 ticks/s to ~1 tick/s). ``switch_variant`` answers only when
the new engine has compiled, which can take seconds; served by the agent's executor it would stall every tick
for that long. Served here, it blocks only this thread.

The companion is named ``_<agent>_services`` (a leading underscore hides it from ``ros2 node list`` unless
``-a``), ignores the process's global ROS arguments (a ``__node:=`` remap would otherwise rename it too), and
creates its services under names the agent node resolved, so ``-r switch_variant:=...`` remaps still apply.
Its spin loop survives a callback that raises (counted in ``errors``): one bad call never ends the thread.
"""
from __future__ import annotations

import traceback
from typing import Any, Callable, Optional

from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from .spinning import SpinThread

# Requests a companion service holds while it serves one (a burst of asynchronous switch_variant calls).
REQUEST_QUEUE_DEPTH = 256


class CompanionServices:
    """Owns the companion node and the thread that spins it. ``close()`` is idempotent."""

    def __init__(self, owner: Node):
        self._owner = owner
        self.node = Node(f"_{owner.get_name()}_services", namespace=owner.get_namespace(), context=owner.context,
                         use_global_arguments=False, start_parameter_services=False, enable_rosout=False)
        self._executor = SingleThreadedExecutor(context=owner.context)
        self._executor.add_node(self.node)
        self.errors = 0
        self._spinner: Optional[SpinThread] = SpinThread(self._executor, name=f"{owner.get_name()}_services",
                                                          period_s=0.1, on_error=self._on_error)

    def _on_error(self, exc: BaseException) -> None:
        """e.g. a response to a client that went away: logged, and the next call is served."""
        self.errors += 1
        self.node.get_logger().warning("companion service callback failed: "
                                       + "".join(traceback.format_exception_only(type(exc), exc)).strip())

    def create_service(self, srv_type: Any, name: str, callback: Callable,
                       queue_depth: int = REQUEST_QUEUE_DEPTH) -> Any:
        """A service named as the owner would resolve ``name`` (namespace, node name, remaps), whose request
        queue holds ``queue_depth`` requests waiting while one is served (ROS's default holds 10: a burst of
        asynchronous calls to a service that waits for a build lost all but 10, never answered)."""
        qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=int(queue_depth),
                         reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)
        return self.node.create_service(srv_type, self._owner.resolve_service_name(name), callback, qos_profile=qos)

    def destroy_service(self, service: Any) -> None:
        self.node.destroy_service(service)

    def close(self) -> None:
        """Join the spinner, then shut its executor down and destroy the node (the order of
        ``spinning.stop_spinning``): rclpy's ``Executor.shutdown`` destroys the guard conditions a spin in another
        thread may still be waiting on."""
        if self._spinner is None:
            return
        self._spinner.stop(timeout=2.0)
        self._executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        self._spinner = None
