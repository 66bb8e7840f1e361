"""Sensor adapters (pure, no rclpy): a modality fed by a standard message (``sensor_msgs/BatteryState``,
``JointState``, ``LaserScan``, ``vision_msgs/Detection2DArray``, ...) instead of ``CategoricalObservation``,
configured by the ``adapters.<modality>.*`` parameters. ``config`` checks the parameters, ``paths`` follows a field
path, ``schema`` checks an adapter against its message type's definition, ``check`` runs both as the one checker
that returns refusals, ``reading`` turns a message into an observation (``evidence``: soft evidence from a declared
noise), ``sampling`` does the inverse for sample bags. The node's subscriptions are in ``ros/adapter_inputs.py``.
``controls`` binds a controlled factor's control to a message the same way (``controls.<factor>.*``: a velocity
command binned, a Nav2 action's goal statuses), and ``events`` turns a condition on a factor's belief into events
(``events.<name>.*``: thresholds, hysteresis, a minimum duration), all checked by the one checker."""
from .check import Checked, Refusal, check_adapters, check_bindings, check_group, parse_adapters
from .controls import ControlSpec, GoalStatusSpec, check_controls, parse_controls, read_control
from .events import Event, EventMonitor, EventSpec, EventState, check_events, parse_events, step_events
from .config import KEYS, PARAMETER_HELP, PREFIX, REDUCTIONS, TESTED_TYPES, AdapterConfigError, AdapterSpec
from .paths import MAX_ENTRIES
from .reading import REASONS, Reading, read_level
from .sampling import NotSampleable, sample_value
from .schema import FieldType, check_spec

__all__ = [
    "KEYS", "MAX_ENTRIES", "PARAMETER_HELP", "PREFIX", "REASONS", "REDUCTIONS", "TESTED_TYPES", "AdapterConfigError",
    "AdapterSpec", "Checked", "ControlSpec", "Event", "EventMonitor", "EventSpec", "EventState", "FieldType",
    "GoalStatusSpec", "NotSampleable", "Reading", "Refusal", "check_adapters", "check_bindings", "check_controls",
    "check_events", "check_group", "check_spec", "parse_adapters", "parse_controls", "parse_events", "read_control",
    "read_level", "sample_value", "step_events",
]
