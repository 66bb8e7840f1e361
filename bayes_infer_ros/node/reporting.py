"""What the node counts and logs: its counters (shown in /diagnostics) and warnings throttled per key by a log
throttle that says how many messages it swallowed."""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, Optional, Sequence

from .admission import AdmissionReport


class Throttle:
    """Per-key log throttle that says how many events it swallowed (rclpy's throttle is per call site)."""

    def __init__(self, period_s: float = 5.0):
        self.period_s = period_s
        self._last: dict[Any, float] = {}
        self._suppressed: dict[Any, int] = {}

    def __call__(self, key: Any) -> Optional[int]:
        """None: swallow this one; otherwise log it, with the count swallowed since the last one logged."""
        now = time.monotonic()
        if now - self._last.get(key, -1e9) >= self.period_s:
            self._last[key] = now
            return self._suppressed.pop(key, 0)
        self._suppressed[key] = self._suppressed.get(key, 0) + 1
        return None


class Reporter:
    """The node's counters (shown in its status) and its warnings, throttled per key; ``closed()``: True once the
    node is being destroyed (throttled warnings are dropped then)."""

    def __init__(self, log: Any, closed: Callable[[], bool], period_s: float = 5.0):
        self.log, self._closed = log, closed
        self.counters: dict[str, int] = {}
        self._throttle = Throttle(period_s)
        self._once: set[str] = set()

    def count(self, key: str, n: int = 1) -> None:
        self.counters[key] = self.counters.get(key, 0) + n

    def warn_throttled(self, key: Any, message: str) -> None:
        swallowed = None if self._closed() else self._throttle(key)
        if swallowed is not None:
            self.log.warning(message + (f" (+{swallowed} more like it in the last {self._throttle.period_s:g} s)"
                                        if swallowed else ""))

    def error_once(self, key: str, line: str) -> str:
        """Log ``line`` as an error and count ``key`` the first time it is given for ``key`` ("" line: nothing);
        returns ``line``."""
        if line and key not in self._once:
            self._once.add(key)
            self.log.error(line)
            self.count(key)
        return line

    def warnings(self, found: Sequence[tuple[str, str]]) -> None:
        """Log each (warning, counter) and count its counter ("": none)."""
        for line, counter in found:
            self.log.warning(line)
            if counter:
                self.count(counter)

    def admission(self, done: AdmissionReport, prefix: str = "") -> None:
        """Count (each key after ``prefix``: an agent's ``<agent>/``) and log what admission did with one
        observation."""
        for key in done.counters:
            self.count(prefix + key)
        for key, line in done.warnings:
            self.warn_throttled(key, line)
        if done.info:
            self.log.info(done.info)


# The cache modules' warnings (Python logging, once per process) reach the newest node's logger.
CACHE_LOGGERS = ("bayes_infer_ros.inference.kernel_cache", "bayes_infer_ros.inference.jax_cache")


class _ToNodeLog(logging.Handler):
    """Python logging records (WARNING and above) to a node's logger (``target``: the newest node's)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.target: Any = None

    def emit(self, record: logging.LogRecord) -> None:
        target = self.target
        if target is not None:
            (target.error if record.levelno >= logging.ERROR else target.warning)(record.getMessage())


_TO_NODE_LOG = _ToNodeLog()


def forward_cache_warnings(log: Any) -> None:
    """Send the cache modules' warnings to ``log`` (an rclpy logger) from now on."""
    _TO_NODE_LOG.target = log
    for name in CACHE_LOGGERS:
        logger = logging.getLogger(name)
        if _TO_NODE_LOG not in logger.handlers:
            logger.addHandler(_TO_NODE_LOG)
