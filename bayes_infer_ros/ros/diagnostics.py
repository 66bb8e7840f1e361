"""What the node reports: the ``/diagnostics`` status of the inference (level, message, key/values), its counters
and throttled warnings (a log throttle that says how many messages it swallowed). Reading only: building a status
changes no state."""
from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

from ..node import help_text as node_help
from ..node.admission import AdmissionReport, Inputs
from ..node.builder import EngineSlot
from ..node.engine_host import EngineHost
from ..node.statistics import TickStatistics
from ..node.tick_loop import TickLoop

SIM_CLOCK_GRACE_S = 3.0  # use_sim_time without a /clock message for this long: diagnostics WARN


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

    def admission(self, done: AdmissionReport) -> None:
        """Count and log what admission did with one observation."""
        for key in done.counters:
            self.count(key)
        for key, line in done.warnings:
            self.warn_throttled(key, line)
        if done.info:
            self.log.info(done.info)


@dataclass
class Health:
    """The node-level facts the status is judged on."""

    active: bool
    device: str
    rate_hz: float
    observation_timeout: float
    switch_pending: bool
    build_error: str
    sim_time_without_clock: bool


def sim_time_without_clock(use_sim_time: bool, clock_ns: int, since_start_s: float) -> bool:
    """use_sim_time is on and no /clock message came (the node clock reads 0) for SIM_CLOCK_GRACE_S since start."""
    return bool(use_sim_time) and clock_ns == 0 and since_start_s > SIM_CLOCK_GRACE_S


def node_status(name: str, fqn: str, host: EngineHost, config_error: str, loop: Optional[TickLoop],
                counters: dict[str, int], *, active: bool, param: Callable[[str], Any], clock_ns: int,
                since_start_s: float, duplicate: str = "") -> DiagnosticStatus:
    """The status of the node: :func:`unconfigured_status` without a ``loop`` (not configured), else
    :func:`inference_status` (``param(name)``: the node's parameter values; ``clock_ns``: its clock;
    ``since_start_s``: seconds since it started), led by ``duplicate`` (:func:`with_duplicate`) when the graph
    holds another node of this name."""
    if loop is None:
        return with_duplicate(unconfigured_status(name, fqn, host.stage or config_error or
                                                  node_help.unconfigured_hint(fqn),
                                                  error=bool(config_error) and not host.stage), duplicate)
    health = Health(active=active, device=host.device, rate_hz=float(param("rate_hz")),
                    observation_timeout=float(param("observation_timeout")), switch_pending=host.busy,
                    build_error=host.build_error,
                    sim_time_without_clock=sim_time_without_clock(param("use_sim_time"), clock_ns, since_start_s))
    return with_duplicate(inference_status(name, fqn, health, host.slot, loop.stats, loop.inputs, counters,
                                           time.monotonic()), duplicate)


def with_duplicate(status: DiagnosticStatus, duplicate: str) -> DiagnosticStatus:
    """``status`` led by the duplicate-name warning (at least WARN) when ``duplicate`` is one."""
    if duplicate:
        if status.level == DiagnosticStatus.OK:
            status.level = DiagnosticStatus.WARN
        status.message = f"{duplicate}; {status.message}"
        status.values = list(status.values) + [KeyValue(key="duplicate_node_name", value=duplicate)]
    return status


def diagnostic_array(status: DiagnosticStatus, stamp: Any) -> DiagnosticArray:
    """``status`` alone in a ``DiagnosticArray`` stamped ``stamp`` (a ``builtin_interfaces/Time``)."""
    arr = DiagnosticArray()
    arr.header.stamp = stamp
    arr.status = [status]
    return arr


def unconfigured_status(name: str, fqn: str, message: str, error: bool) -> DiagnosticStatus:
    """Not configured: WARN while configuring or waiting to be, ERROR after a failed configure."""
    return _status(name, fqn, DiagnosticStatus.ERROR if error else DiagnosticStatus.WARN, message, {})


def inference_status(name: str, fqn: str, health: Health, slot: EngineSlot, stats: TickStatistics, inputs: Inputs,
                     counters: dict[str, int], now: float) -> DiagnosticStatus:
    """The status of a configured node (``now``: time.monotonic()). WARN, first reason first: sim time without
    /clock, tick p99 over the period, a modality being rejected, silent modalities, a failed build."""
    period_ms = 1e3 / health.rate_hz if health.rate_hz > 0 else float("nan")
    values: dict[str, Any] = {
        "active": health.active, "device": health.device,
        "algorithm": slot.config.algorithm, "variant": slot.variant,
        "variant_requested": slot.config.variant, "variant_note": slot.note,
        "engine_compile_s": f"{slot.compile_s:.3f}", "switch_pending": health.switch_pending,
        "last_build_error": health.build_error, "tick_period_ms": f"{period_ms:.3f}",
    }
    values.update(stats.values())
    silent = []
    for mod in inputs.modalities:
        if health.active and inputs.is_silent(mod, now, health.observation_timeout):
            silent.append(mod.name)
        values[f"input.{mod.name}.rate_hz"] = f"{mod.rate.rate(now):.2f}"
        values[f"input.{mod.name}.received"] = mod.received
        values[f"input.{mod.name}.accepted"] = mod.accepted
        values[f"input.{mod.name}.superseded"] = mod.superseded
        values[f"input.{mod.name}.pending"] = int(mod.fresh is not None)  # accepted, waiting for a tick
        values[f"input.{mod.name}.rejected"] = sum(mod.rejected.values())
    values.update(sorted(counters.items()))
    values["dropped_total"] = sum(v for k, v in counters.items() if k.rsplit("/", 1)[-1].startswith("rejected."))
    rejecting = inputs.rejecting(now) if health.active else {}
    values["rejecting"] = ", ".join(f"{k} ({v})" for k, v in rejecting.items())
    p99 = stats.tick.percentile_ms(99)
    level, message = DiagnosticStatus.OK, "ok"
    if health.active and health.sim_time_without_clock:
        level, message = DiagnosticStatus.WARN, ("use_sim_time is true but no /clock message has arrived: "
                                                 "the node clock stands at 0 (no timer ticks)")
    elif health.active and health.rate_hz > 0 and stats.tick.count and p99 > period_ms:
        level, message = DiagnosticStatus.WARN, f"tick p99 {p99:.2f} ms > period {period_ms:.2f} ms"
    elif rejecting:
        level, message = DiagnosticStatus.WARN, "rejecting input: " + values["rejecting"]
    elif silent:
        level, message = DiagnosticStatus.WARN, f"silent modalities: {silent}"
    elif health.build_error:
        level, message = DiagnosticStatus.WARN, f"last engine build failed: {health.build_error[:200]}"
    elif not health.active:
        message = "inactive"
    return _status(name, fqn, level, message, values, health.device)


def status_name(fqn: str) -> str:
    """The status name: the node's fully qualified name, so agents in different namespaces never merge in the
    aggregator (``/robot1/agent: inference``; config/diagnostics_analyzers.yaml groups them)."""
    return f"{fqn}: inference"


def hardware_id(device: str) -> str:
    """The machine and the device the engine runs on (``host/cpu``); ``host`` alone before configure."""
    host = socket.gethostname() or "localhost"
    return f"{host}/{device}" if device else host


def _status(name: str, fqn: str, level: Any, message: str, values: dict[str, Any],
            device: str = "") -> DiagnosticStatus:
    status = DiagnosticStatus()
    status.name, status.hardware_id = status_name(fqn), hardware_id(device)
    status.level, status.message = level, message
    status.values = [KeyValue(key=str(k), value=str(v)) for k, v in values.items()]
    return status
