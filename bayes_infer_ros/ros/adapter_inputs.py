"""The node's sensor adapters: the ``adapters.*`` parameters checked against the configured model and the installed
message definitions, and each adapted message turned into the node's admission arguments (the pure part is
``bayes_infer_ros.adapters``).

A message type is looked up in the ament index (``rosidl_interfaces``: the message packages installed on
AMENT_PREFIX_PATH) before anything is imported, so a type naming some other Python package imports nothing. Where
rosidl_runtime_py is installed (a ROS 2 install: ros2cli uses it), its ``get_message_types`` reads the index and its
``utilities.get_message`` imports the class; without it (the PyPI wheels), the same two steps are done here
(:func:`installed_interfaces`, ``importlib``). Its generated class then describes every field (``SLOT_TYPES``), and
``adapters.schema.check_spec`` refuses an adapter that cannot read the type, naming the parameter: the node does this
before it builds the engine. A package that is not installed is refused with the line that installs it
(``vision_msgs``: ``rosdep install``, package.xml declares it, or ``ros-<distro>-vision-msgs``).

An adapted modality is subscribed on its adapter's topic with its message type (SensorDataQoS, as
``observations/<modality>`` would be) instead of ``observations/<modality>``. Its stamp is the message's
``header.stamp``; a message without a header is unstamped (it stands for its arrival time, ``admission.py``).
"""
from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from typing import Any, Mapping

from ament_index_python import get_resource, get_resources
from rosidl_parser.definition import AbstractGenericString, AbstractNestedType, BasicType, NamespacedType

try:  # optional: rosidl_runtime_py (a ROS 2 install has it; the PyPI wheels do not): the ament-index walk below
    from rosidl_runtime_py.get_interfaces import get_message_types
    from rosidl_runtime_py.utilities import get_message
except ImportError:
    get_message_types = get_message = None

from bayes_infer_ros.adapters import (
    AdapterConfigError, AdapterSpec, FieldType, Reading, check_spec, parse_adapters, read_level,
)

DESCRIPTION = ("Sensor adapter (README, 'Sensor adapters'): the modality reads this message instead of "
               "observations/<modality>. Read at configure.")
_FLOATS = ("float", "double", "long double", "float32", "float64")
_OTHER = ("octet", "char", "wchar", "byte")


def installed_interfaces(package: str) -> set[str] | None:
    """The interfaces the ament index lists for ``package`` (``msg/BatteryState.msg``, ...); None when it lists
    no such package."""
    try:
        content, _ = get_resource("rosidl_interfaces", package)
    except LookupError:
        return None
    return {line.split(";")[0].strip() for line in content.splitlines() if line.strip()}


def installed_messages(package: str) -> list[str] | None:
    """The message names (``BatteryState``, ...) the ament index lists for ``package``; None when it lists no such
    package. rosidl_runtime_py's ``get_message_types`` where it is installed, else :func:`installed_interfaces`."""
    if get_message_types is not None:
        try:
            return list(get_message_types(package))
        except LookupError:
            return None
    interfaces = installed_interfaces(package)
    if interfaces is None:
        return None
    return sorted({i[len("msg/"):].rsplit(".", 1)[0] for i in interfaces if i.startswith("msg/")
                   and i.endswith((".msg", ".idl"))})


def install_hint(package: str) -> str:
    """How to install the message package ``package``."""
    return (f"install it (`rosdep install --from-paths src --ignore-src` where package.xml declares it, or "
            f"`apt install ros-$ROS_DISTRO-{package.replace('_', '-')}`) and source its setup file")


def import_message(typename: str) -> type:
    """The generated class of ``pkg/msg/Name``: rosidl_runtime_py's ``get_message`` where it is installed, else
    ``importlib`` as it does. Raises ImportError, AttributeError or ValueError saying why."""
    if get_message is not None:
        return get_message(typename)
    pkg, kind, name = typename.split("/")
    return getattr(importlib.import_module(f"{pkg}.{kind}"), name)


def message_class(typename: str, param: str) -> type:
    """The generated class of ``pkg/msg/Name``, imported only once the ament index lists it; AdapterConfigError
    (``param``) otherwise."""
    pkg, _, name = typename.split("/")
    messages = installed_messages(pkg)
    if messages is None:
        known = ", ".join(sorted(get_resources("rosidl_interfaces"))) or "none"
        raise AdapterConfigError(f"{param}: no message package {pkg!r} is installed (the ament index on "
                                 f"AMENT_PREFIX_PATH lists {known}); {install_hint(pkg)}")
    if name not in messages:
        raise AdapterConfigError(f"{param}: {pkg} has no message {name!r} (its messages: {', '.join(messages)})")
    try:
        return import_message(typename)
    except (ImportError, AttributeError, ValueError) as exc:
        raise AdapterConfigError(f"{param}: {typename} is installed but its Python class cannot be imported ({exc}); "
                                 "is its package built for this Python and sourced?") from None


def _field_type(slot: Any) -> FieldType:
    """A rosidl_parser type (an entry of a generated class's SLOT_TYPES) as ``adapters.schema`` describes it."""
    sequence = isinstance(slot, AbstractNestedType)
    element = slot.value_type if sequence else slot
    if isinstance(element, NamespacedType):
        return FieldType("message", "/".join([*element.namespaces, element.name]), sequence)
    if isinstance(element, AbstractGenericString):
        return FieldType("string", sequence=sequence)
    if isinstance(element, BasicType):
        name = element.typename
        kind = ("number" if name in _FLOATS else "boolean" if name == "boolean" else "other" if name in _OTHER
                else "integer")
        return FieldType(kind, sequence=sequence)
    return FieldType("other", sequence=sequence)


@functools.lru_cache(maxsize=256)
def describe(typename: str) -> dict[str, FieldType]:
    """The fields of message type ``typename`` (``pkg/msg/Name``) from its generated class."""
    cls = message_class(typename, typename)
    return {name: _field_type(slot) for name, slot in zip(cls.get_fields_and_field_types(), cls.SLOT_TYPES)}


@dataclass(frozen=True)
class AdaptedReading:
    """A message's observation (or the reason it is refused) and its header stamp ((0, 0): none)."""

    reading: Reading
    sec: int = 0
    nanosec: int = 0


class AdapterInputs:
    """The adapters of one configured model, by modality index, each checked against its message type."""

    def __init__(self, specs: Mapping[str, AdapterSpec]):
        self.specs = {spec.modality_index: spec for spec in specs.values()}
        self.classes: dict[int, type] = {}
        for i, spec in self.specs.items():
            self.classes[i] = message_class(spec.type, f"{spec.param}.type")
            check_spec(spec, describe)

    @classmethod
    def from_parameters(cls, params: Mapping[str, Any], model: Any) -> "AdapterInputs":
        """``params``: the node's ``adapters.*`` parameters (flat names); ``model``: the configured model."""
        names = [model.modality_name(i) for i in range(model.num_modalities)]
        labels = [model.observation_label_list(i) for i in range(model.num_modalities)]
        return cls(parse_adapters(params, names, labels))

    def subscription(self, i: int, name: str, observation_type: type, prefix: str = "") -> tuple[type, str]:
        """(message class, topic) that modality ``i`` (``name``) of the agent whose topics are under ``prefix``
        (``<agent>/``, "" for a node's single agent) reads: its adapter's (a relative adapter topic under the
        prefix), or ``observation_type`` on ``<prefix>observations/<name>``."""
        spec = self.specs.get(i)
        if spec is None:
            return observation_type, f"{prefix}observations/{name}"
        return self.classes[i], spec.topic if spec.topic.startswith(("/", "~")) else prefix + spec.topic

    def observation(self, i: int, msg: Any) -> dict[str, Any]:
        """The node's admission arguments for ``msg`` (``level``, ``probabilities``, ``sec``, ``nanosec``,
        ``refused``: (reason, detail) or None); soft evidence goes as ``level`` -1 with its ``probabilities``, as
        a ``CategoricalObservation`` would send it. See :meth:`read`. Never raises."""
        got = self.read(i, msg)
        reading = got.reading
        if reading.probabilities is not None:
            level, probabilities = -1, reading.probabilities
        else:
            level, probabilities = (-1 if reading.level is None else reading.level), ()
        return dict(level=level, probabilities=probabilities, sec=got.sec, nanosec=got.nanosec,
                    refused=None if reading.ok else (reading.reason, reading.detail))

    def read(self, i: int, msg: Any) -> AdaptedReading:
        """Modality ``i``'s observation in ``msg`` and its stamp. Never raises."""
        try:
            reading = read_level(msg, self.specs[i])
        except Exception as exc:  # noqa: BLE001 - a message must never take the node down
            reading = Reading(None, "missing_field", f"{type(exc).__name__}: {exc}")
        stamp = getattr(getattr(msg, "header", None), "stamp", None)
        if stamp is None:
            return AdaptedReading(reading)
        return AdaptedReading(reading, int(stamp.sec), int(stamp.nanosec))
