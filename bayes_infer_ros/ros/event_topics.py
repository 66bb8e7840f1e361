"""The belief events' topics: per agent, ``~/events`` (``bayes_infer_ros/BeliefEvent``: each event that fired, stamped
with the tick that crossed it) and one latched ``~/events/<name>`` per event (``std_msgs/Bool``: its value now, for a
behaviour-tree condition); with ``agents``, ``~/<agent>/events`` and ``~/<agent>/events/<name>``.

QoS: ``~/events`` reliable, volatile, depth 10 (events are news: a late subscriber reads the values from the Bool
topics); each Bool reliable, transient local, depth 1, so a subscriber that joins late (a behaviour tree started after
the node) gets the value at once; ``qos_overrides`` can change both. They are plain publishers in both node modes: a
Bool holds False from configure on, and keeps its last value while the node is inactive (no tick changes it then).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from builtin_interfaces.msg import Time
from std_msgs.msg import Bool

from bayes_infer_ros.adapters import Event, EventSpec
from bayes_infer_ros.msg import BeliefEvent

from ..node.admission import output_stamp
from .qos import overridable, profile as qos

EVENTS_DEPTH = 10


def event_topic(prefix: str, name: str = "") -> str:
    """``~/events`` (``name`` "") or ``~/events/<name>`` of the agent whose topics are under ``prefix``."""
    base = f"~/{prefix}events"
    return f"{base}/{name}" if name else base


def _time(stamp_ns: int) -> Time:
    sec, nanosec = output_stamp(stamp_ns)
    return Time(sec=sec, nanosec=nanosec)


def event_message(event: Event, spec: EventSpec) -> BeliefEvent:
    """The ``BeliefEvent`` of ``event`` (an event of ``spec``)."""
    msg = BeliefEvent(name=event.name, value=bool(event.value), factor=spec.factor, level=spec.level_label,
                      probability=float(event.probability))
    msg.header.stamp = _time(event.stamp_ns)
    msg.confirmed = _time(event.confirmed_ns)
    return msg


class EventTopics:
    """Every agent's event publishers (``prefixes``: each agent's ``<agent>/`` or ""), made with ``create``
    (``node.create_publisher``'s signature); ``entities``: what the node destroys at cleanup."""

    def __init__(self, create: Callable[..., Any], prefixes: Sequence[str], specs: Sequence[EventSpec]):
        self.specs = {spec.name: spec for spec in specs}
        self.streams: list[Any] = []
        self.values: list[dict[str, Any]] = []
        for prefix in prefixes if self.specs else ():
            self.streams.append(create(BeliefEvent, event_topic(prefix), qos(EVENTS_DEPTH, reliable=True),
                                       qos_overriding_options=overridable()))
            self.values.append({name: create(Bool, event_topic(prefix, name),
                                             qos(1, reliable=True, transient_local=True),
                                             qos_overriding_options=overridable()) for name in self.specs})
        for pubs in self.values:  # False until the first tick says otherwise
            for pub in pubs.values():
                pub.publish(Bool(data=False))

    @property
    def entities(self) -> list[Any]:
        return self.streams + [pub for pubs in self.values for pub in pubs.values()]

    @staticmethod
    def topics_of(prefixes: Sequence[str], specs: Sequence[EventSpec]) -> list[str]:
        """The topics the publishers of ``specs`` for the agents under ``prefixes`` have, unresolved (for name clashes
        and qos_overrides)."""
        return [t for prefix in prefixes if specs
                for t in [event_topic(prefix)] + [event_topic(prefix, spec.name) for spec in specs]]

    def publish(self, k: int, events: Sequence[Event]) -> None:
        """Agent ``k``'s events that fired: each on ``~/events``, and its new value on ``~/events/<name>``."""
        if not self.streams:
            return
        for event in events:
            self.streams[k].publish(event_message(event, self.specs[event.name]))
            self.values[k][event.name].publish(Bool(data=bool(event.value)))
