"""Declaring the node's parameters on an rclpy node (public rclpy API only).

The command line and params files can hold anything. :func:`take_overrides` reads them: the node is created with
``automatically_declare_parameters_from_overrides=True``, so each override is a declared parameter at first;
it is read with ``get_parameters_by_prefix('')`` and undeclared again. :func:`declare_parameters` then declares
each row of the parameter table with its descriptor: a value the table refuses is logged and the default is used,
``model.*`` and ``adapters.*`` overrides are declared for the loader (``PREFIXED``: read at configure, so a change
applies at the next configure), and every other key is warned about (with a "did you mean" when one is close).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.exceptions import ParameterException
from rclpy.node import Node

from .parameters import PARAMETERS, unknown_parameters, validate_change

# Nested parameters declared from the params file (read at configure), with their description.
PREFIXED = {
    "model.": "Model structure/tensor (see bayes_infer_ros.model.io). Read at configure: cleanup, set, configure "
              "loads the new values; a change while configured applies at the next configure.",
    "adapters.": "Sensor adapter of a modality (docs/node.md, 'Sensor adapters'; bayes_infer_ros.adapters). Read at "
                 "configure: a change applies at the next configure.",
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


def model_parameter_values(node: Node, names: Sequence[str]) -> dict[str, Any]:
    """name -> value of the declared ``model.*`` parameters among ``names``; array values as plain lists (rclpy
    gives array.array / lists) for the model loader."""
    out = {}
    for name in names:
        if node.has_parameter(name):
            value = node.get_parameter(name).value
            out[name] = list(value) if isinstance(value, (list, tuple)) or type(value).__name__ == "array" else value
    return out


def declare_parameters(node: Node, overrides: dict[str, Any], variants: Sequence[str], error: Callable[[str], None],
                       warn: Callable[[str], None], count: Callable[[str], None]) -> list[str]:
    """Declare the table's parameters and the ``model.*`` / ``adapters.*`` overrides; returns the ``model.*``
    names."""
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
    model_names = prefixed_names(overrides, "model.")
    for prefix, description in PREFIXED.items():
        for name in prefixed_names(overrides, prefix):
            value = overrides[name]
            if value is None or (isinstance(value, (list, tuple)) and len(value) == 0):
                continue
            node.declare_parameter(name, value, ParameterDescriptor(description=description))
    for line in unknown_parameters(overrides.keys(), [s.name for s in PARAMETERS], tuple(PREFIXED)):
        warn(line)
        count("unknown_parameters")
    return model_names


def _refuse(node: Node, spec: Any, value: Any, reason: str, error: Callable[[str], None],
            count: Callable[[str], None]) -> None:
    error(f"parameter '{spec.name}' = {value!r} from the command line / params file refused: {reason.strip()}; "
          f"using the default {spec.default!r}")
    count("rejected_parameters")
    node.declare_parameter(spec.name, spec.default, descriptor(spec), ignore_override=True)
