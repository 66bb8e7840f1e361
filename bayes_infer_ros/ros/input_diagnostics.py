"""The ``/diagnostics`` statuses of the node's inputs, beside its own (``diagnostics.py``): one per modality, named
``<node fqn>: <modality>`` (with agents ``<node fqn>: <agent>/<modality>``), and one per control adapter, named
``<node fqn>: controls.<factor>`` (``<node fqn>: <agent>/controls.<factor>``). Each status's ``hardware_id`` is the
resolved topic the input arrives on (``/robot1/scan``: the sensor; two modalities read from one message share it), and
its values name the message type. Reading only: building a status changes no state.

A modality's status is WARN, first reason first, while its recent surprise is above its threshold, while its newest
message was refused, or while it is silent (active node only); a control adapter's while its newest message was
refused. The same facts also feed the node's own status (its message names the first such input).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from diagnostic_msgs.msg import DiagnosticStatus

from ..node.admission import Inputs, ModalityState, being_rejected
from ..node.control_feeds import ControlFeed
from ..node.surprise import ModalitySurprise
from .diagnostic_status import make_status


@dataclass(frozen=True)
class InputSource:
    """Where an input arrives: its resolved topic and its message type (``pkg/msg/Name``)."""

    topic: str
    type: str


def modality_status(fqn: str, mod: ModalityState, source: InputSource, now: float, *, active: bool,
                    timeout_s: float, surprise: Optional[ModalitySurprise] = None) -> DiagnosticStatus:
    """Modality ``mod``'s status (``now``: the admission clock's seconds; ``timeout_s``: ``observation_timeout``;
    ``surprise``: its statistics, None without evidence)."""
    values: dict[str, object] = {"topic": source.topic, "type": source.type, "rate_hz": f"{mod.rate.rate(now):.2f}",
                                 "received": mod.received, "accepted": mod.accepted, "superseded": mod.superseded,
                                 "pending": int(mod.fresh is not None), "rejected": sum(mod.rejected.values())}
    values.update({f"rejected.{reason}": n for reason, n in sorted(mod.rejected.items())})
    if surprise is not None:
        for key, value in (("last", surprise.last), ("mean", surprise.mean), ("p95", surprise.p95),
                           ("recent_mean", surprise.recent_mean)):
            values[f"surprise.{key}"] = f"{value:.3f}"
        values["surprise.outliers"] = surprise.outliers
    level, message = DiagnosticStatus.OK, "ok"
    if active and surprise is not None and surprise.warning:
        level, message = DiagnosticStatus.WARN, (f"surprising input: mean {surprise.recent_mean:.2f} nats over its "
                                                 f"recent readings > {surprise.threshold:g}")
    elif being_rejected(now, mod.last_rejected, mod.last_accepted):
        level, message = DiagnosticStatus.WARN, f"rejecting input ({mod.last_reason})"
    elif active and Inputs.is_silent(mod, now, timeout_s):
        level, message = DiagnosticStatus.WARN, f"silent: no valid message for more than {timeout_s:g} s"
    elif mod.received == 0:
        message = "no message yet"
    return make_status(f"{fqn}: {mod.name}", source.topic, level, message, values)


def control_status(fqn: str, feed: ControlFeed, topic: str, now: float) -> DiagnosticStatus:
    """Control adapter ``feed``'s status (``topic``: its resolved topic; ``now``: ``time.monotonic()``)."""
    values: dict[str, object] = {"topic": topic, "type": feed.type, "factor": feed.factor,
                                 "control": feed.control_label, "received": feed.received, "accepted": feed.accepted,
                                 "rejected": sum(feed.rejected.values())}
    values.update({f"rejected.{reason}": n for reason, n in sorted(feed.rejected.items())})
    level, message = DiagnosticStatus.OK, f"control {feed.control_label}" if feed.accepted else "no control yet"
    if feed.rejecting(now):
        level, message = DiagnosticStatus.WARN, f"rejecting input ({feed.last_reason}): {feed.last_detail[:200]}"
    return make_status(f"{fqn}: {feed.name}", topic, level, message, values)


def input_statuses(fqn: str, modalities: Sequence[ModalityState], sources: Sequence[InputSource],
                   surprise: Sequence[Optional[ModalitySurprise]], feeds: Sequence[tuple[ControlFeed, str]],
                   now: float, now_monotonic: float, *, active: bool, timeout_s: float) -> list[DiagnosticStatus]:
    """Every modality's status (``modalities``, ``sources`` and ``surprise`` in one order: every agent's, agent by
    agent), then every control adapter's (``feeds``: (feed, resolved topic))."""
    out = [modality_status(fqn, mod, source, now, active=active, timeout_s=timeout_s, surprise=stats)
           for mod, source, stats in zip(modalities, sources, surprise, strict=True)]
    return out + [control_status(fqn, feed, topic, now_monotonic) for feed, topic in feeds]
