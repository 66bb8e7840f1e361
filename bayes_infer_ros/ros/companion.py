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

import threading
import traceback
from typing import Any, Callable

from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node


class CompanionServices:
    """Owns the companion node and the thread that spins it. ``close()`` is idempotent."""

    def __init__(self, owner: Node):
        self._owner = owner
        self.node = Node(f"_{owner.get_name()}_services", namespace=owner.get_namespace(), context=owner.context,
                         use_global_arguments=False, start_parameter_services=False, enable_rosout=False)
        self._executor = SingleThreadedExecutor(context=owner.context)
        self._executor.add_node(self.node)
        self._stop = threading.Event()
        self.errors = 0
        self._thread = threading.Thread(target=self._spin, name=f"{owner.get_name()}_services", daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        while not self._stop.is_set() and self._owner.context.ok():
            try:
                self._executor.spin_once(timeout_sec=0.1)
            except ExternalShutdownException:
                return
            except Exception:  # noqa: BLE001 - e.g. a response to a client that went away; the next call is served
                self.errors += 1
                if not self._stop.is_set():
                    self.node.get_logger().warning("companion service callback failed: "
                                                   + traceback.format_exc(limit=2).strip().splitlines()[-1])

    def create_service(self, srv_type: Any, name: str, callback: Callable) -> Any:
        """A service named as the owner would resolve ``name`` (namespace, node name, remaps)."""
        return self.node.create_service(srv_type, self._owner.resolve_service_name(name), callback)

    def destroy_service(self, service: Any) -> None:
        self.node.destroy_service(service)

    def close(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._executor.shutdown(timeout_sec=1.0)
        self._thread.join(timeout=2.0)
        self.node.destroy_node()
        self._thread = None
