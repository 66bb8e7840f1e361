"""Declaring the node's parameters on an rclpy node (public rclpy API only).

The command line and params files can hold anything. :func:`take_overrides` reads them: the node is created with
``automatically_declare_parameters_from_overrides=True``, so each override is a declared parameter at first;
it is read with ``get_parameters_by_prefix('')`` and undeclared again. :func:`declare_parameters` then declares
each row of the parameter table with its descriptor: a value the table refuses is logged and the default is used,
``model.*``, ``adapters.*``, ``controls.*``, ``events.*`` and ``surprise_*`` overrides are declared for the loader
(``PREFIXED``: read at configure, so a change applies at the next configure), and every other key is warned about
(with a "did you mean" when one is close).

An override ROS cannot type (an empty list ``[]``: rcl gives it no type) cannot be declared at all; rclpy's
constructor would raise naming nothing. :func:`split_untyped` sets such overrides aside by name (the node's
``declare_parameters`` calls it) and :func:`untyped_reason` is the node's refusal to configure.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.exceptions import ParameterException
from rclpy.node import Node

from ..node.parameters import PARAMETERS, unknown_parameters, validate_change

# Nested parameters declared from the params file (read at configure), with their description.
PREFIXED = {
    "model.": "Model structure/tensor (see bayes_infer_ros.model.io). Read at configure: cleanup, set, configure "
              "loads the new values; a change while configured applies at the next configure.",
    "adapters.": "Sensor adapter of a modality (docs/node.md, 'Sensor adapters'; bayes_infer_ros.adapters). Read at "
                 "configure: a change applies at the next configure.",
    "surprise_gate.": "Nats: a reading of this modality whose surprise under the tick's prior predictive is above it is "
                      "refused as an outlier (counted 'outlier') before it enters the tick (docs/node.md, 'Free "
                      "energy and surprise'). Read at configure.",
    "surprise_threshold.": "Nats: /diagnostics warns while the mean surprise of this modality's last "
                           "surprise_warn_ticks readings is above it (docs/node.md, 'Free energy and surprise'). Read "
                           "at configure.",
    "controls.": "Control adapter of a controlled factor: its control read from the robot's own message (a Twist "
                 "field binned, a Nav2 action's status; docs/node.md, 'Control adapters'). Read at configure.",
    "events.": "Belief event: a condition on a factor's belief, published on ~/events and ~/events/<name> "
               "(docs/node.md, 'Belief events'). Read at configure.",
}
# Declared by rclpy itself (their overrides are rclpy's to apply).
RCLPY_PARAMETERS = ("use_sim_time", "start_type_description_service")


def descriptor(spec: Any) -> ParameterDescriptor:
    """The ParameterDescriptor of one row of the parameter table."""
    # an empty list default has no ROS type of its own (rclpy would make it a byte array): typed by its first value
    d = ParameterDescriptor(description=spec.description, read_only=spec.read_only,
                            dynamic_typing=isinstance(spec.default, list))
    constraints = []
    if spec.choices:
        constraints.append("one of: " + ", ".join(spec.choices))
    if spec.read_only:
        constraints.append(f"read-only: set it in the params file or with `--ros-args -p {spec.name}:=VALUE` "
                           "and restart the node")
    d.additional_constraints = "; ".join(constraints)
    if spec.int_range:
        d.integer_range = [IntegerRange(from_value=spec.int_range[0], to_value=spec.int_range[1], step=1)]
    if spec.float_range:
        d.floating_point_range = [FloatingPointRange(from_value=float(spec.float_range[0]),
                                                     to_value=float(spec.float_range[1]), step=0.0)]
    return d


def split_untyped(parameters: Sequence[Any]) -> tuple[list[Any], list[str]]:
    """``(name, value, descriptor)`` rows of ``Node.declare_parameters`` -> (the rows to declare, the names of
    those without a type: value None, which is what rclpy reads for an empty list)."""
    kept, untyped = [], []
    for row in parameters:
        if isinstance(row, tuple) and len(row) >= 2 and row[1] is None:
            untyped.append(str(row[0]))
        else:
            kept.append(row)
    return kept, untyped


def untyped_reason(names: Sequence[str]) -> str:
    """Why the node does not configure with the untyped overrides ``names`` ("" when there are none)."""
    if not names:
        return ""
    listed = ", ".join(f"'{n}'" for n in sorted(names))
    return (f"parameter {listed} is an empty list in the params file / command line: ROS cannot give an empty list "
            f"a type, so it was not declared; write at least one value, or remove the key")


class UntypedOverrides:
    """Node mixin: rclpy's ``declare_parameters`` with the overrides that have no type set aside by name
    (``untyped_overrides``, logged as an error). The constructor declares every override through it when
    ``automatically_declare_parameters_from_overrides`` is on, and would raise naming nothing."""

    untyped_overrides: list = []

    def declare_parameters(self, namespace: str, parameters: Any, ignore_override: bool = False) -> Any:
        parameters, untyped = split_untyped(parameters)
        if untyped:
            self.untyped_overrides = list(self.untyped_overrides) + untyped
            self.get_logger().error(untyped_reason(untyped))  # type: ignore[attr-defined]
        return super().declare_parameters(namespace, parameters, ignore_override)  # type: ignore[misc]

    def refuse_untyped(self) -> None:
        """Raise ValueError (why the node does not configure) when an override could not be declared."""
        if self.untyped_overrides:
            raise ValueError(untyped_reason(self.untyped_overrides))


def take_overrides(node: Node) -> dict[str, Any]:
    """name -> value of every parameter override (params files, ``-p``, ``parameter_overrides``), undeclared
    again. ``node`` was created with ``automatically_declare_parameters_from_overrides=True`` and has declared
    nothing else yet."""
    out = {}
    for name, param in sorted(node.get_parameters_by_prefix("").items()):
        if name in RCLPY_PARAMETERS:
            continue
        out[name] = param.value
        node.undeclare_parameter(name)
    return out


def prefixed_names(overrides: dict[str, Any], prefix: str) -> list[str]:
    """The override names under ``prefix`` (``model.``, ``adapters.``), sorted."""
    return sorted(n for n in overrides if n.startswith(prefix))


def plain_value(value: Any) -> Any:
    """A parameter's value as the node's settings hold it: array values as plain lists (rclpy gives
    ``array.array`` for numeric arrays), the rest as they are."""
    return list(value) if isinstance(value, (list, tuple)) or type(value).__name__ == "array" else value


def declare_parameters(node: Node, overrides: dict[str, Any], variants: Sequence[str], error: Callable[[str], None],
                       warn: Callable[[str], None], count: Callable[[str], None]) -> None:
    """Declare the table's parameters and the nested overrides (``PREFIXED``: ``model.*``, ``adapters.*``, ...)."""
    for spec in PARAMETERS:
        value = overrides.get(spec.name)
        if value is not None:  # nonsense in the params file / on the command line: say so, use the default
            reason = validate_change(spec.name, value, variants=variants, has_B=True, startup=True)
            if reason is not None:
                _refuse(node, spec, value, reason, error, count)
                continue
            if isinstance(spec.default, float) and isinstance(value, int) and not isinstance(value, bool):
                # `rate_hz: 50` in YAML is an integer; ROS would refuse it for a double parameter
                node.declare_parameter(spec.name, float(value), descriptor(spec), ignore_override=True)
                continue
        try:
            node.declare_parameter(spec.name, spec.default, descriptor(spec))
        except ParameterException as exc:
            _refuse(node, spec, value, str(exc), error, count)
    for prefix, description in PREFIXED.items():
        for name in prefixed_names(overrides, prefix):
            value = overrides[name]
            if value is None or (isinstance(value, (list, tuple)) and len(value) == 0):
                continue
            node.declare_parameter(name, value, ParameterDescriptor(description=description))
    for line in unknown_parameters(overrides.keys(), [s.name for s in PARAMETERS], tuple(PREFIXED)):
        warn(line)
        count("unknown_parameters")


def _refuse(node: Node, spec: Any, value: Any, reason: str, error: Callable[[str], None],
            count: Callable[[str], None]) -> None:
    error(f"parameter '{spec.name}' = {value!r} from the command line / params file refused: {reason.strip()}; "
          f"using the default {spec.default!r}")
    count("rejected_parameters")
    node.declare_parameter(spec.name, spec.default, descriptor(spec), ignore_override=True)
