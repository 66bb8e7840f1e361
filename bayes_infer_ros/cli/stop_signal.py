"""SIGINT and SIGTERM stop the node process as a request, never as an exception, and end it within a bound that
the signal itself arms.

Python's own SIGINT handling raises KeyboardInterrupt wherever the main thread is, and during the node's start-up
that is anywhere: inside an import (a traceback), inside jaxlib's native module set-up (nanobind turns it into an
abort, "terminate called after throwing an instance of 'nanobind::python_error'", or a segfault freeing the
half-made module), inside JAX's garbage-collector callback (swallowed: the node then ran on, and nothing else would
stop it). rclpy's own handler, the one ``rclpy.init`` installs, shuts every context down from a thread of its own at
any moment, so whatever the main thread is creating meanwhile (the node, its executor, configure's topics) fails
with RCLError.

Here, instead: the Python handler of both signals does nothing; Python writes the signal's number to a pipe
(``signal.set_wakeup_fd``), and a watcher thread reading that pipe

1. marks the stop requested (:attr:`StopSignal.requested`) and calls the stop callbacks (the node process's: ask
   its spin to end, ``ros.spinning.request_stop``);
2. ends the process ``bound_s`` after the signal if it is still running (:func:`exit_now`, status 0), whatever the
   main thread is doing, even waiting inside native code.

The main thread checks the request between start-up's steps, its spin loop and configure's wait end on it, and it
tears down in its own order. Installed once per process, from the main thread, before the imports that take
seconds (``scripts/agent_node``); this module uses the standard library only.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from typing import Callable, NoReturn, Optional

#: Seconds from SIGINT/SIGTERM to the end of the process, whatever is left to tear down (docs/node.md, "Stopping").
SHUTDOWN_BOUND_S = 5.0
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def exit_now(status: int = 0) -> NoReturn:
    """End the process at once with ``status``, its output flushed (Python's streams, then C's: rcutils logs through
    ``fprintf``). No atexit handler, interpreter finalisation or C++ static destructor runs: CPython before 3.14 ends a
    daemon thread that takes the GIL during finalisation with ``pthread_exit``, whose forced unwind through a
    ``noexcept`` C++ frame (an XLA or numba compile returning to Python) aborts the process ("terminate called
    without an active exception")."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):  # None, a closed stream, a reader that went away
            pass
    try:
        ctypes.CDLL(None).fflush(None)
    except (AttributeError, OSError):  # no C library to ask (not Linux or macOS)
        pass
    os._exit(status)


def _do_nothing(signum: int, frame: object) -> None:
    """The signals' Python handler: having one makes Python write the signal to the wakeup pipe; the watcher acts."""


class StopSignal:
    """The process's stop request: set by the first SIGINT/SIGTERM (or :meth:`request`), with callbacks and a
    bound. Thread-safe."""

    def __init__(self, bound_s: float = SHUTDOWN_BOUND_S):
        self.bound_s = bound_s
        self._requested = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []

    @property
    def requested(self) -> bool:
        return self._requested.is_set()

    def on_stop(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once when the stop is requested (at once, in this thread, if it already was). An
        exception it raises is dropped: the stop goes on."""
        with self._lock:
            if not self._requested.is_set():
                self._callbacks.append(callback)
                return
        _call(callback)

    def request(self) -> None:
        """Request the stop (what a signal does): mark it, then call the callbacks registered so far. Idempotent."""
        with self._lock:
            if self._requested.is_set():
                return
            self._requested.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            _call(callback)

    def watch(self, read_fd: int) -> None:
        """The watcher thread's body: wait for SIGINT or SIGTERM on the wakeup pipe ``read_fd``, request the stop,
        and end the process :attr:`bound_s` after the signal."""
        while True:
            try:
                data = os.read(read_fd, 64)
            except OSError:
                return
            if not data:
                return
            if any(byte in STOP_SIGNALS for byte in data):
                break
        deadline = time.monotonic() + self.bound_s
        self.request()
        time.sleep(max(0.0, deadline - time.monotonic()))
        exit_now(0)


def _call(callback: Callable[[], None]) -> None:
    try:
        callback()
    except Exception:  # noqa: BLE001 - e.g. waking an executor already shut down: the stop goes on
        pass


_installed: Optional[StopSignal] = None


def install(bound_s: float = SHUTDOWN_BOUND_S) -> StopSignal:
    """The process's :class:`StopSignal`, installed on the first call (from the main thread: Python's rule for
    signal handlers); later calls return it as it is."""
    global _installed
    if _installed is not None:
        return _installed
    stop = StopSignal(bound_s)
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    threading.Thread(target=stop.watch, args=(read_fd,), name="stop_signal", daemon=True).start()
    signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    for signum in STOP_SIGNALS:
        signal.signal(signum, _do_nothing)
    _installed = stop
    return stop
