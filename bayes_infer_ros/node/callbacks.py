"""Callbacks that never let an exception reach rclpy's executor (an escaped exception ends ``spin`` and with it
the process): each failure is counted and logged (throttled per callback), and a fallback result is returned."""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional


class CallbackGuard:
    """``count(key)`` counts ``callback_errors``; ``warn(key, message)`` logs throttled per ``key``."""

    def __init__(self, count: Callable[[str], None], warn: Callable[[Any, str], None]):
        self._count, self._warn = count, warn

    def __call__(self, fn: Callable, on_error: Optional[Callable[[Exception], Any]] = None) -> Callable:
        """``fn`` as a contained callback: on an exception, ``on_error(exc)`` is returned (None without one)."""
        name = getattr(fn, "__name__", None) or getattr(getattr(fn, "func", None), "__name__", "callback")

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - the executor (and so the process) must survive any callback
                self._count("callback_errors")
                self._warn(("callback_error", name), f"{name} failed and was contained: {type(exc).__name__}: {exc}")
                return on_error(exc) if on_error is not None else None

        return wrapper

    def service(self, fn: Callable, response_type: Any) -> Callable:
        """A service callback that always answers (``success`` False and the error when it raised)."""

        def on_error(exc: Exception) -> Any:
            response = response_type()
            response.success, response.message = False, f"internal error: {type(exc).__name__}: {exc}"
            return response

        return self(fn, on_error)
