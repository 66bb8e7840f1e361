"""The node's control adapters: the ``controls.*`` parameters checked against the configured model and the installed
message definitions (before the engine build, a refusal naming the key), each binding's message class, and each
message read into a control (the pure part is ``bayes_infer_ros.adapters.controls``; what the node does with the
control, ``node/control_feeds.py``).

A binding is subscribed on its topic with its type (under ``<agent>/`` with agents, as a sensor adapter's topic is),
reliable with depth 100 as ``controls`` is (a velocity command is sent once; ``qos_overrides`` can change it). Its
stamp is the message's ``header.stamp`` (TwistStamped, Odometry); a message without a header (Twist,
GoalStatusArray) is unstamped.
"""
from __future__ import annotations

from typing import Any, Mapping

from std_msgs.msg import Header

from bayes_infer_ros.adapters import ControlSpec, Reading, check_controls, read_control
from bayes_infer_ros.adapters.controls import control_targets, factor_index_of

from ..node.control_feeds import agent_topic
from .adapter_inputs import AdaptedReading, describe, message_class


class ControlInputs:
    """The control adapters of one configured model, by factor index, each checked against its message type."""

    def __init__(self, specs: Mapping[str, ControlSpec]):
        self.specs = {factor_index_of(spec): spec for spec in specs.values()}
        self.classes = {f: message_class(spec.type, f"{spec.param}.type") for f, spec in self.specs.items()}

    @classmethod
    def from_parameters(cls, params: Mapping[str, Any], model: Any) -> "ControlInputs":
        """``params``: the node's ``controls.*`` parameters (flat names); ``model``: the configured model.
        AdapterConfigError naming the first key that cannot be used (a field the installed type lacks included)."""
        names, labels = control_targets(model)
        return cls(check_controls(params, names, labels, describe).raise_first())

    def subscription(self, f: int, prefix: str = "") -> tuple[type, str]:
        """(message class, topic) of factor ``f``'s binding for the agent whose topics are under ``prefix``."""
        return self.classes[f], agent_topic(self.specs[f].topic, prefix)

    def read(self, f: int, msg: Any) -> AdaptedReading:
        """Factor ``f``'s control in ``msg`` (a control index, or the refusal's reason) and its header stamp ((0, 0):
        none). Never raises."""
        try:
            reading = read_control(msg, self.specs[f])
        except Exception as exc:  # noqa: BLE001 - a message must never take the node down
            reading = Reading(None, "missing_field", f"{type(exc).__name__}: {exc}")
        header = getattr(msg, "header", None)
        if not isinstance(header, Header):
            return AdaptedReading(reading)
        return AdaptedReading(reading, int(header.stamp.sec), int(header.stamp.nanosec))
