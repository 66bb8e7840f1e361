"""Sensor adapters (pure, no rclpy): a modality fed by a standard message (``sensor_msgs/BatteryState``,
``LaserScan``, ``std_msgs/String``, ...) instead of ``CategoricalObservation``, configured by the
``adapters.<modality>.*`` parameters. ``config`` checks the parameters, ``reading`` turns a message into a level,
``sampling`` does the inverse for sample bags. The node's subscriptions are in ``ros/adapter_inputs.py``."""
from .config import (
    KEYS, PARAMETER_HELP, PREFIX, REDUCTIONS, TESTED_TYPES, AdapterConfigError, AdapterSpec, flatten, parse_adapters,
    split_parameters,
)
from .reading import Reading, check_template, read_level
from .sampling import NotSampleable, sample_value

__all__ = [
    "KEYS", "PARAMETER_HELP", "PREFIX", "REDUCTIONS", "TESTED_TYPES", "AdapterConfigError", "AdapterSpec", "NotSampleable",
    "Reading", "check_template", "flatten", "parse_adapters", "read_level", "sample_value", "split_parameters",
]
