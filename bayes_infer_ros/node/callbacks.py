"""Callbacks that never let an exception reach rclpy's executor (an escaped exception ends ``spin`` and with it
the process): each failure is counted and logged (throttled per callback), and a fallback result is returned."""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Optional

# Set on every callback this module wraps, so a second pass over a node's entities leaves it as it is.
CONTAINED_ATTR = "contained_by_callback_guard"


def is_contained(fn: Any) -> bool:
    """Whether ``fn`` is already a :class:`CallbackGuard` wrapper."""
    return bool(getattr(fn, CONTAINED_ATTR, False))


def callback_name(fn: Any) -> str:
    """A readable name for ``fn``: its ``__name__`` (a partial's function's), or "callback"."""
    return getattr(fn, "__name__", None) or getattr(getattr(fn, "func", None), "__name__", "callback")


class CallbackGuard:
    """``count(key)`` counts ``callback_errors``; ``warn(key, message)`` logs throttled per ``key``."""

    def __init__(self, count: Callable[[str], None], warn: Callable[[Any, str], None]):
        self._count, self._warn = count, warn

    def contained(self, name: str, exc: BaseException) -> None:
        """Count and log one exception that a callback named ``name`` raised (throttled per name)."""
        self._count("callback_errors")
        self._warn(("callback_error", name), f"{name} failed and was contained: {type(exc).__name__}: {exc}")

    def __call__(self, fn: Callable, on_error: Optional[Callable[[Exception], Any]] = None,
                 name: Optional[str] = None) -> Callable:
        """``fn`` as a contained callback: on an exception, ``on_error(exc)`` is returned (None without one).
        A coroutine function stays one (rclpy's executor awaits it). ``name``: what the log calls it."""
        label = name or callback_name(fn)
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def wrapper(*args, **kwargs):
                try:
                    return await fn(*args, **kwargs)
                except Exception as exc:  # noqa: BLE001 - the executor (and so the process) must survive it
                    self.contained(label, exc)
                    return on_error(exc) if on_error is not None else None
        else:
            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                try:
                    return fn(*args, **kwargs)
                except Exception as exc:  # noqa: BLE001 - the executor (and so the process) must survive any callback
                    self.contained(label, exc)
                    return on_error(exc) if on_error is not None else None

        setattr(wrapper, CONTAINED_ATTR, True)
        return wrapper

    def service(self, fn: Callable, response_type: Any) -> Callable:
        """A service callback that always answers (``success`` False and the error when it raised)."""

        def on_error(exc: Exception) -> Any:
            response = response_type()
            response.success, response.message = False, f"internal error: {type(exc).__name__}: {exc}"
            return response

        return self(fn, on_error)
