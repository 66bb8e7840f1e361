"""The node's ``/diagnostics`` status of the inference (level, message, key/values), from its runtime's state and
counters (``node/reporting.py``); its inputs' statuses are ``input_diagnostics.py``'s, published beside it in one
array. Reading only: building a status changes no state."""
from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

from ..node import help_text as node_help
from ..node.admission import Inputs, ModalityState
from ..autotune.deployment import Deployment
from ..node.runtime import AgentRuntime
from ..node.statistics import TickStatistics
from ..node.surprise import ModalitySurprise
from .diagnostic_status import STATUS_BUILDER, make_status

SIM_CLOCK_GRACE_S = 3.0  # use_sim_time without a /clock message for this long: diagnostics WARN


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
    verification: str = ""


def sim_time_without_clock(use_sim_time: bool, clock_ns: int, since_start_s: float) -> bool:
    """use_sim_time is on and no /clock message came (the node clock reads 0) for SIM_CLOCK_GRACE_S since start."""
    return bool(use_sim_time) and clock_ns == 0 and since_start_s > SIM_CLOCK_GRACE_S


def node_status(name: str, fqn: str, runtime: AgentRuntime, config_error: str, *, clock_ns: int, since_start_s: float,
                duplicate: str = "") -> DiagnosticStatus:
    """The status of the node: :func:`unconfigured_status` while ``runtime`` is not configured, else
    :func:`inference_status` (from the runtime's settings; ``clock_ns``: its clock; ``since_start_s``: seconds since
    it started), led by ``duplicate`` (:func:`with_duplicate`) when the graph holds another node of this name."""
    loop, deployment, deployer, settings = runtime.loop, runtime.deployment, runtime.deployer, runtime.settings
    if loop is None or deployment is None:
        return with_duplicate(unconfigured_status(name, fqn, runtime.stage or config_error or
                                                  node_help.unconfigured_hint(fqn),
                                                  error=bool(config_error) and not runtime.stage), duplicate)
    health = Health(active=runtime.active, device=deployment.device, rate_hz=settings.rate_hz,
                    observation_timeout=settings.observation_timeout, switch_pending=runtime.busy,
                    build_error=deployer.build_error if deployer is not None else "",
                    verification=deployer.verification if deployer is not None else "",
                    sim_time_without_clock=sim_time_without_clock(settings.use_sim_time, clock_ns, since_start_s))
    now = runtime.now_s(clock_ns)
    events = {f"event.{runtime.agent_prefix(k)}{n}": v for k in range(len(runtime.events.monitors))
              for n, v in runtime.events.values(k).items()}
    return with_duplicate(inference_status(name, fqn, health, deployment, loop.stats, loop.modalities,
                                           loop.rejecting(now) if health.active else {},
                                           runtime.reporter.counters, now, loop.surprise_statistics(),
                                           settings.surprise_warn_ticks, events), duplicate)


def with_duplicate(status: DiagnosticStatus, duplicate: str) -> DiagnosticStatus:
    """``status`` led by the duplicate-name warning (at least WARN) when ``duplicate`` is one."""
    if duplicate:
        if status.level == DiagnosticStatus.OK:
            status.level = DiagnosticStatus.WARN
        status.message = f"{duplicate}; {status.message}"
        status.values = list(status.values) + [KeyValue(key="duplicate_node_name", value=duplicate)]
    return status


def diagnostic_array(status: DiagnosticStatus, stamp: Any,
                     more: Sequence[DiagnosticStatus] = ()) -> DiagnosticArray:
    """``status`` (the node's) then ``more`` (its inputs') in a ``DiagnosticArray`` stamped ``stamp`` (a
    ``builtin_interfaces/Time``)."""
    arr = DiagnosticArray()
    arr.header.stamp = stamp
    arr.status = [status, *more]
    return arr


def unconfigured_status(name: str, fqn: str, message: str, error: bool) -> DiagnosticStatus:
    """Not configured: WARN while configuring or waiting to be, ERROR after a failed configure."""
    return _status(name, fqn, DiagnosticStatus.ERROR if error else DiagnosticStatus.WARN, message, {})


def surprise_values(surprise: Sequence[tuple[str, str, ModalitySurprise]]) -> dict[str, Any]:
    """Each modality's surprise statistics (nats, three decimals; ``nan`` before its first reading):
    ``surprise.<modality>.last``, ``.mean`` and ``.p95`` over the window, ``.recent_mean`` (its last
    surprise_warn_ticks readings) and ``.recent_mean_max`` (the largest over the window), ``.readings``,
    ``.outliers``, its ``.gate`` and ``.threshold`` when it has them, and while it warns ``.warning_since``: the stamp
    (``sec.nanosec``) of the tick from which the warning holds."""
    values: dict[str, Any] = {}
    for name, _topic, st in surprise:
        key = f"surprise.{name}"
        for field, value in (("last", st.last), ("mean", st.mean), ("p95", st.p95), ("recent_mean", st.recent_mean),
                             ("recent_mean_max", st.recent_mean_max)):
            values[f"{key}.{field}"] = f"{value:.3f}"
        values[f"{key}.readings"] = st.readings
        values[f"{key}.outliers"] = st.outliers
        for field, value in (("gate", st.gate), ("threshold", st.threshold)):
            if value != float("inf"):
                values[f"{key}.{field}"] = f"{value:g}"
        if st.warning_since_ns is not None:
            values[f"{key}.warning_since"] = "{}.{:09d}".format(*divmod(st.warning_since_ns, 1_000_000_000))
    return values


def surprise_warning(surprise: Sequence[tuple[str, str, ModalitySurprise]], warn_ticks: int) -> str:
    """The warning naming each modality (and the topic it arrives on) whose recent surprise is above its threshold
    ("" when none is)."""
    parts = [f"{name} on {topic}: mean {st.recent_mean:.2f} nats over its last {warn_ticks} readings > "
             f"{st.threshold:g}" for name, topic, st in surprise if st.warning]
    if not parts:
        return ""
    return "surprising input (a faulty sensor, or a model that no longer fits): " + "; ".join(parts)


def inference_status(name: str, fqn: str, health: Health, slot: Deployment, stats: TickStatistics,
                     modalities: Sequence[ModalityState], rejecting: dict[str, str], counters: dict[str, int],
                     now: float, surprise: Sequence[tuple[str, str, ModalitySurprise]] = (),
                     warn_ticks: int = 0, events: Optional[dict[str, bool]] = None) -> DiagnosticStatus:
    """The status of a configured node (``now``: the admission clock's seconds, ``AgentRuntime.now_s``;
    ``modalities``: every agent's; ``rejecting``: modality -> the reason its newest message was refused, for those
    being rejected now; ``surprise``: every agent's modalities' surprise statistics (name, topic, statistics), empty
    without evidence; ``events``: each belief event's value, ``event.<agent/><name>``). WARN, first reason first:
    sim time without /clock, tick p99 over the period, a modality whose recent surprise is above its threshold, a
    modality being rejected, silent modalities, a failed build."""
    period_ms = 1e3 / health.rate_hz if health.rate_hz > 0 else float("nan")
    values: dict[str, Any] = {
        "active": health.active, "device": health.device,
        "algorithm": slot.config.algorithm, "variant": slot.variant,
        "variant_requested": slot.config.variant, "variant_note": slot.note, "verification": health.verification,
        "engine_compile_s": f"{slot.compile_s:.3f}", "switch_pending": health.switch_pending,
        "last_build_error": health.build_error, "tick_period_ms": f"{period_ms:.3f}",
        "status_builder": STATUS_BUILDER,
    }
    values.update(stats.values())
    silent = []
    for mod in modalities:
        if health.active and Inputs.is_silent(mod, now, health.observation_timeout):
            silent.append(mod.name)
        values[f"input.{mod.name}.rate_hz"] = f"{mod.rate.rate(now):.2f}"
        values[f"input.{mod.name}.received"] = mod.received
        values[f"input.{mod.name}.accepted"] = mod.accepted
        values[f"input.{mod.name}.superseded"] = mod.superseded
        values[f"input.{mod.name}.pending"] = int(mod.fresh is not None)  # accepted, waiting for a tick
        values[f"input.{mod.name}.rejected"] = sum(mod.rejected.values())
    values.update(sorted(counters.items()))
    values["dropped_total"] = sum(v for k, v in counters.items() if k.rsplit("/", 1)[-1].startswith("rejected."))
    values["rejecting"] = ", ".join(f"{k} ({v})" for k, v in rejecting.items())
    values.update(surprise_values(surprise))
    values.update(events or {})
    surprising = surprise_warning(surprise, warn_ticks) if health.active else ""
    if surprise:
        values["surprise_warnings"] = ", ".join(n for n, _, st in surprise if st.warning)
    p99 = stats.tick.percentile_ms(99)
    level, message = DiagnosticStatus.OK, "ok"
    if health.active and health.sim_time_without_clock:
        level, message = DiagnosticStatus.WARN, ("use_sim_time is true but no /clock message has arrived: "
                                                 "the node clock stands at 0 (no timer ticks)")
    elif health.active and health.rate_hz > 0 and stats.tick.count and p99 > period_ms:
        level, message = DiagnosticStatus.WARN, f"tick p99 {p99:.2f} ms > period {period_ms:.2f} ms"
    elif surprising:
        level, message = DiagnosticStatus.WARN, surprising
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
    return make_status(status_name(fqn), hardware_id(device), level, message, values)
