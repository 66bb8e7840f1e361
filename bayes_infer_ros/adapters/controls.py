"""Control adapters (pure: no rclpy): a controlled factor's control read from the robot's own messages, configured
by the ``controls.<factor>.*`` parameters, checked by the adapters' checker (``check.py``) into one frozen spec per
factor, and each message turned into a control index or a refusal with the readings' reasons (``reading.REASONS``).

Two kinds of binding, told apart by their keys:

- **A message field** (``topic``, ``type``, ``field``, ...: an adapter's keys, ``config.py``) binned or mapped into
  the factor's control levels (``bins`` / ``bin_levels`` or ``levels``, by control label or index). A velocity
  command: ``geometry_msgs/msg/Twist`` ``linear.x``, ``TwistStamped`` ``twist.linear.x``, ``nav_msgs/msg/Odometry``
  ``twist.twist.linear.x``, or the speed, ``field: linear`` (``twist.linear``, ...) with ``reduction: norm``. The
  spec is an :class:`AdapterSpec` whose target is the factor (``modality``: its name, ``modality_index``: its index,
  ``num_levels``: its number of controls) with ``prefix`` ``controls.``. A control is one level: ``sigma`` and
  ``confusion.<level>`` (soft evidence) are refused.
- **A Nav2 action's status** (``topic``, ``type: action_msgs/msg/GoalStatusArray``, ``active``, ``idle``): the
  action server's ``<action>/_action/status`` topic (``navigate_to_pose/_action/status``), a list of the goals it
  knows with their status. While any goal is ACCEPTED, EXECUTING or CANCELING (:data:`ACTIVE_STATUSES`: the robot
  is being driven to it, or is stopping for a cancel) the control is ``active``; when none is (no goal, or every goal
  SUCCEEDED, CANCELED or ABORTED) it is ``idle``. A :class:`GoalStatusSpec`.

What is refused besides the adapters' own checks: a name that is not a factor of the model, a factor with one
control (nothing to tell apart: every factor of a model without B), ``sigma`` and ``confusion``, ``active`` or
``idle`` on another type, a goal status binding with an adapter's keys (``field``, ``bins``, ...), and ``active``
equal to ``idle``. A message whose status list is missing, longer than ``paths.MAX_ENTRIES``, or holds a status
that is not one of action_msgs' (0..6) is refused (``missing_field``, ``too_large``, ``unknown_value``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np

from .check import Checked, check_definition, check_group
from .config import (KEYS, AdapterConfigError, AdapterSpec, exact_string, is_parameter_value, level_index,
                     normalize_type, parse_adapter, shown)
from .paths import MAX_ENTRIES, is_sequence, parse_path
from .reading import Reading, read_level
from .schema import INTEGER, Lookup, follow

PREFIX = "controls."
GOAL_STATUS_ARRAY = "action_msgs/msg/GoalStatusArray"
STATUS_PATH = "status_list[].status"
# action_msgs/msg/GoalStatus: UNKNOWN 0, ACCEPTED 1, EXECUTING 2, CANCELING 3, SUCCEEDED 4, CANCELED 5, ABORTED 6.
GOAL_STATUSES = range(0, 7)
ACTIVE_STATUSES = frozenset({1, 2, 3})
GOAL_KEYS = ("topic", "type", "active", "idle")
# Every key a control binding takes (a field binding: an adapter's, less the soft evidence; a goal status binding:
# GOAL_KEYS); ``levels`` also as ``levels.<level>``.
SOFT_EVIDENCE = ("sigma", "confusion")
CONTROL_KEYS = tuple(k for k in KEYS if k not in SOFT_EVIDENCE) + ("active", "idle")
PARAMETER_HELP = (
    ("topic, type, field, ...", "a message field binned into the factor's controls: an adapter's keys (README, "
                                "'Sensor adapters') with bins/bin_levels or levels naming control labels; no sigma "
                                "or confusion (a control is one level)"),
    ("active", f"with type {GOAL_STATUS_ARRAY} (a Nav2 action's <action>/_action/status): the control while a "
               "goal is ACCEPTED, EXECUTING or CANCELING (label or index)"),
    ("idle", "with active: the control while no goal is (none, or every goal finished)"),
)


@dataclass(frozen=True)
class GoalStatusSpec:
    """A controlled factor (``factor``, ``factor_index``, ``num_levels``: its number of controls) fed by an action
    server's goal statuses: control ``active`` while a goal is active (:data:`ACTIVE_STATUSES`), else ``idle``."""

    factor: str
    factor_index: int
    num_levels: int
    topic: str
    type: str
    active: int
    idle: int
    prefix: str = PREFIX

    @property
    def param(self) -> str:
        return f"{self.prefix}{self.factor}"


ControlSpec = Union[AdapterSpec, GoalStatusSpec]


def factor_index_of(spec: ControlSpec) -> int:
    """The index of the factor ``spec`` feeds."""
    return spec.factor_index if isinstance(spec, GoalStatusSpec) else spec.modality_index


def control_targets(model: Any) -> tuple[list[str], list[list[str]]]:
    """(factor names, control labels of each factor) of a GenerativeModel: its ``controls`` labels, or the
    indices as strings (``["0", "1"]``) when it has none."""
    names = [model.factor_name(f) for f in range(model.num_factors)]
    labels = [list(model.control_labels[f]) if model.control_labels else [str(u) for u in range(n)]
              for f, n in enumerate(model.num_controls)]
    return names, labels


# ---- the settings --------------------------------------------------------------------------------------------
def parse_control(name: str, keys: Mapping[str, Any], factor_names: Sequence[str],
                  control_labels: Sequence[Sequence[str]], lookup: Optional[Lookup] = None) -> ControlSpec:
    """One ``controls.<name>.*`` group (keys without the prefix) -> its spec; AdapterConfigError naming the first
    key that cannot be used. With ``lookup``, the message type's definition is checked too."""
    root = f"{PREFIX}{name}"
    if name not in factor_names:
        raise AdapterConfigError(f"{root}: the model has no factor {name!r} (factors: {list(factor_names)})")
    index = list(factor_names).index(name)
    labels = [str(x) for x in control_labels[index]]
    if len(labels) < 2:
        raise AdapterConfigError(f"{root}: factor {name!r} has {len(labels)} control ({labels}): there is nothing "
                                 "to bind (its transitions B take one control; a model without B takes none)")
    for key in keys:
        if key.split(".")[0] in SOFT_EVIDENCE:
            raise AdapterConfigError(f"{root}.{key}: a control is one level, not evidence: sigma and confusion are "
                                     "for sensor adapters")
        if key not in CONTROL_KEYS and not key.startswith("levels."):
            raise AdapterConfigError(f"{root}.{key}: unknown key (expected one of {list(CONTROL_KEYS)})")
    if "active" in keys or "idle" in keys:
        return _goal_status(root, name, index, keys, labels, lookup)
    spec = parse_adapter(name, keys, factor_names, control_labels, PREFIX)
    if lookup is not None:
        check_definition(spec, lookup)
    return spec


def _goal_status(root: str, name: str, index: int, keys: Mapping[str, Any], labels: Sequence[str],
                 lookup: Optional[Lookup]) -> GoalStatusSpec:
    given = exact_string(root, keys, "type", GOAL_STATUS_ARRAY)
    try:
        msg_type = normalize_type(given)
    except ValueError as exc:
        raise AdapterConfigError(f"{root}.type: {exc}") from None
    if msg_type != GOAL_STATUS_ARRAY:
        raise AdapterConfigError(f"{root}.type: active and idle read a goal status array ({GOAL_STATUS_ARRAY}, an "
                                 f"action's <action>/_action/status), not {msg_type}; a field of {msg_type} is bound "
                                 "with field and bins or levels")
    for key, value in keys.items():
        if key not in GOAL_KEYS:
            raise AdapterConfigError(f"{root}.{key}: a goal status binding (active, idle) reads {STATUS_PATH} "
                                     f"itself; its keys are {list(GOAL_KEYS)}")
        if not is_parameter_value(value):
            raise AdapterConfigError(f"{root}.{key}: expected a ROS parameter value (a boolean, integer, double or "
                                     f"string, or a list of one of those), got {shown(value)}")
    topic = exact_string(root, keys, "topic", "navigate_to_pose/_action/status")
    for key in ("active", "idle"):
        if key not in keys:
            raise AdapterConfigError(f"{root}.{key}: required with {'idle' if key == 'active' else 'active'}: the "
                                     f"control while {'a goal is' if key == 'active' else 'no goal is'} active "
                                     f"(one of {list(labels)}, or its index)")
    active = level_index(keys["active"], labels, f"{root}.active")
    idle = level_index(keys["idle"], labels, f"{root}.idle")
    if active == idle:
        raise AdapterConfigError(f"{root}.idle: the same control as active ({labels[active]!r}): the binding would "
                                 "tell nothing apart")
    if lookup is not None:
        _check_status_definition(root, msg_type, lookup)
    return GoalStatusSpec(name, index, len(labels), topic, msg_type, active, idle)


def _check_status_definition(root: str, msg_type: str, lookup: Lookup) -> None:
    """The installed definition has ``status_list[].status``, an integer."""
    try:
        lookup(msg_type)
    except (LookupError, OSError, AdapterConfigError) as exc:  # the node's lookup refuses a type by its name
        raise AdapterConfigError(f"{root}.type: {exc}") from None
    try:
        leaf = follow(msg_type, parse_path(STATUS_PATH), lookup, f"{root}.type")
    except (LookupError, OSError) as exc:
        raise AdapterConfigError(f"{root}.type: {exc}") from None
    if leaf.type.kind != INTEGER:
        raise AdapterConfigError(f"{root}.type: {msg_type}'s {STATUS_PATH} holds {leaf.type.kind}s, not the "
                                 "integer statuses of action_msgs")


def check_controls(params: Mapping[str, Any], factor_names: Sequence[str], control_labels: Sequence[Sequence[str]],
                   lookup: Optional[Lookup] = None) -> Checked[ControlSpec]:
    """Every ``controls.*`` parameter of ``params`` (flat ROS names -> values) for a model with these factors and
    control labels; with ``lookup``, against the message definitions too. Never raises."""
    return check_group(params, PREFIX, lambda name, keys: parse_control(name, keys, factor_names, control_labels,
                                                                        lookup), CONTROL_KEYS)


def parse_controls(params: Mapping[str, Any], factor_names: Sequence[str],
                   control_labels: Sequence[Sequence[str]]) -> dict[str, ControlSpec]:
    """Every control binding in ``params``, by factor (the settings alone); AdapterConfigError with the first
    refusal."""
    return check_controls(params, factor_names, control_labels).raise_first()


# ---- a message -> a control ----------------------------------------------------------------------------------
def read_control(msg: Any, spec: ControlSpec) -> Reading:
    """The control ``spec`` reads from ``msg``: ``Reading.level`` is the factor's control index, or ``reason`` (a
    key of ``reading.REASONS``, counted as ``rejected.<reason>`` like a refused reading) and ``detail``. Never
    raises."""
    if isinstance(spec, GoalStatusSpec):
        try:
            return goal_status_control(msg, spec)
        except (AttributeError, TypeError, ValueError) as exc:  # a message unlike its type's definition
            return Reading(None, "missing_field", f"{type(exc).__name__}: {exc}")
    return read_level(msg, spec)  # one-hot: sigma and confusion are refused


_ABSENT = object()


def goal_status_control(msg: Any, spec: GoalStatusSpec) -> Reading:
    """``spec.active`` while any goal of ``msg.status_list`` is active, else ``spec.idle``; refused when the list
    is missing or too long, or a status is not one of action_msgs' (the module docstring)."""
    statuses = getattr(msg, "status_list", _ABSENT)
    if statuses is _ABSENT or not is_sequence(statuses):
        return Reading(None, "missing_field", f"{spec.type}: no sequence status_list")
    if len(statuses) > MAX_ENTRIES:
        return Reading(None, "too_large", f"status_list has {len(statuses)} entries, more than the cap of "
                                          f"{MAX_ENTRIES}")
    active = False
    for k, entry in enumerate(statuses):
        status = getattr(entry, "status", _ABSENT)
        if status is _ABSENT:
            return Reading(None, "missing_field", f"status_list[{k}] has no field 'status'")
        if isinstance(status, (bool, np.bool_)) or not isinstance(status, (int, np.integer)) \
                or int(status) not in GOAL_STATUSES:
            return Reading(None, "unknown_value", f"status_list[{k}].status = {shown(status, 40)} is not a goal "
                                                  f"status of action_msgs (0..{GOAL_STATUSES[-1]})")
        active = active or int(status) in ACTIVE_STATUSES
    return Reading(spec.active if active else spec.idle)
