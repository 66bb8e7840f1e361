"""Spinning an rclpy executor: in a background thread (the one helper the companion services, the replay tools and
the test probe share), and the node process's own spin (:func:`spin_contained`), which ends on :func:`request_stop`.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Optional

import rclpy
from rclpy.context import Context
from rclpy.executors import Executor, ExternalShutdownException


class SpinThread:
    """``executor.spin_once`` in a daemon thread until :meth:`stop` or the executor's context shuts down.

    A callback's exception is handed to ``on_error`` (the thread goes on); without one it ends the thread quietly
    only at shutdown (ExternalShutdownException), and is re-raised otherwise."""

    def __init__(self, executor: Executor, name: str = "spin", period_s: float = 0.05,
                 on_error: Optional[Callable[[BaseException], None]] = None):
        self._executor = executor
        self._period_s = period_s
        self._on_error = on_error
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.is_set() and self._executor.context.ok():
            try:
                self._executor.spin_once(timeout_sec=self._period_s)
            except ExternalShutdownException:
                return
            except Exception as exc:  # noqa: BLE001 - the owner decides (log and go on)
                if self._stop.is_set() or not self._executor.context.ok():
                    return
                if self._on_error is None:
                    raise
                self._on_error(exc)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def stop(self, timeout: float = 2.0) -> None:
        """Ask the thread to end after its current spin and wait up to ``timeout`` s for it. Idempotent."""
        self._stop.set()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(timeout=timeout)


_stop_requested = threading.Event()


def _wake() -> None:
    """A task that does nothing: queued, it makes a waiting ``spin_once`` return (``Executor.wake`` only rebuilds
    the wait set and waits again)."""


def request_stop(executor: Optional[Executor] = None) -> None:
    """Ask this process's ROS work to end: :func:`spin_contained` returns after the callback it is running, and the
    node's configure stops waiting for its build. ``executor``'s waiting spin is woken. Any thread may call it (the
    node process's signal watcher, ``cli/stop_signal.py``): unlike a context shutdown from another thread, it cannot
    fail an entity the main thread is creating; the main thread tears down, and shuts the context down, itself."""
    _stop_requested.set()
    if executor is not None:
        executor.create_task(_wake)


def stop_requested() -> bool:
    """:func:`request_stop` was called (once set, for the life of the process)."""
    return _stop_requested.is_set()


def spin_contained(executor: Executor, on_error: Callable[[BaseException], None]) -> None:
    """``executor.spin()`` that goes on after an exception escapes a callback (or rclpy's taking of a message):
    it is handed to ``on_error`` instead of ending the spin, and with it the process. Returns on
    :func:`request_stop` or when the context shuts down; ExternalShutdownException and KeyboardInterrupt pass
    through, as from ``spin()``."""
    while executor.context.ok() and not stop_requested():
        try:
            executor.spin_once()
        except ExternalShutdownException:
            raise
        except Exception as exc:  # noqa: BLE001 - counted and logged by the owner; the node keeps running
            if not executor.context.ok():
                return
            on_error(exc)


def stop_spinning(executor: Executor, spin: SpinThread, node: Any, context: Optional[Context] = None) -> None:
    """Shut the context down first (the spin returns), join the spinner, then destroy: in the other order the
    process can abort at exit ("terminate called without an active exception")."""
    rclpy.try_shutdown(context=context)
    spin.stop(timeout=5.0)
    executor.shutdown(timeout_sec=1.0)
    node.destroy_node()
