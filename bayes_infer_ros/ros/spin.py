"""Spinning an executor in a background thread, and stopping it in the order rclpy needs."""
from __future__ import annotations

import threading
from typing import Any, Optional

import rclpy
from rclpy.context import Context
from rclpy.executors import Executor


def spin_in_background(executor: Executor) -> threading.Thread:
    """Spin ``executor`` in a daemon thread that ends quietly when its context shuts down."""
    def spin() -> None:
        try:
            executor.spin()
        except Exception:  # noqa: BLE001 - ExternalShutdownException and friends at shutdown
            pass

    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    return thread


def stop_spinning(executor: Executor, thread: threading.Thread, node: Any,
                  context: Optional[Context] = None) -> None:
    """Shut the context down first (spin returns), join the spinner, then destroy: in the other order the
    process can abort at exit ("terminate called without an active exception")."""
    rclpy.try_shutdown(context=context)
    thread.join(timeout=5.0)
    executor.shutdown(timeout_sec=1.0)
    node.destroy_node()
