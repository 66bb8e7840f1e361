"""Sensor messages for sample bags: each step's levels written as the messages a robot's drivers publish, through
the sensor adapters of a params file (``bayes-infer make-bag --adapters``), with rosbags (no rclpy); and each
transition's controls as the robot's own commands, through the file's control adapters (``controls.<factor>``: a
velocity binned, written as a Twist of a speed in the control's bin).

Modalities that share a topic (a BatteryState's ``voltage`` and ``power_supply_status``) share one message per
step. Every other field keeps its type's default; ``header.stamp`` is the step's time. Values come from
``adapters.sampling`` (uniform within the level's bin, written where the adapter reads them: an entry with the key,
a vector of that norm, a scan's sector), so the node's adapters read back the simulated level. A message type that
rosbags does not know (``vision_msgs``) is registered from its installed ``.msg`` files (``interfaces.py``).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import numpy as np
import yaml

from rosbags.typesys.base import Nodetype

from bayes_infer_ros.adapters import AdapterConfigError, AdapterSpec, Checked, FieldType, check_adapters, check_controls
from bayes_infer_ros.adapters.controls import ControlSpec, GoalStatusSpec, control_targets
from bayes_infer_ros.adapters.schema import Lookup
from bayes_infer_ros.adapters.sampling import write_sample
from bayes_infer_ros.model import GenerativeModel
from bayes_infer_ros.model.io import flatten_parameters

from .convert import default_message
from .interfaces import make_typestore, register_installed

STEP_TOPICS_KEY = "step_topics"  # custom_data: the bag topics that make a step besides /observations/*
CONTROL_TOPICS_KEY = "control_topics"  # custom_data: the bag topics of control adapters' messages (cmd_vel)


def adapter_parameters(path: os.PathLike) -> dict[str, Any]:
    """The flat parameters of every node section's ``ros__parameters`` of a params file."""
    doc = yaml.safe_load(Path(path).read_text()) or {}
    params: dict[str, Any] = {}
    for section in doc.values():
        if isinstance(section, dict) and isinstance(section.get("ros__parameters"), dict):
            params.update(flatten_parameters(section["ros__parameters"]))
    return params


def check_model_adapters(params: Mapping[str, Any], model: GenerativeModel,
                         lookup: Optional[Lookup] = None) -> Checked[AdapterSpec]:
    """The ``adapters.*`` parameters of ``params`` checked against ``model``'s modalities and levels and the
    message definitions (``lookup``; default: :func:`definitions_lookup`), as the node checks them at configure.
    Never raises: the refusals name the parameters."""
    names = [model.modality_name(i) for i in range(model.num_modalities)]
    labels = [model.observation_label_list(i) for i in range(model.num_modalities)]
    return check_adapters(params, names, labels, definitions_lookup() if lookup is None else lookup)


def load_adapters(path: os.PathLike, model: GenerativeModel) -> dict[str, AdapterSpec]:
    """The ``adapters.*`` parameters of a params file (every node section's ``ros__parameters``), checked
    against ``model`` and the message types' definitions; AdapterConfigError names the first refused parameter."""
    return check_model_adapters(adapter_parameters(path), model).raise_first()


def load_controls(path: os.PathLike, model: GenerativeModel) -> dict[str, AdapterSpec]:
    """The ``controls.*`` parameters of a params file checked against ``model``'s factors and controls and the message
    definitions, by factor: what ``make-bag --adapters`` writes as the robot's commands. AdapterConfigError names the
    first refused parameter, and a goal status binding (``active`` / ``idle``: a Nav2 action's status, which a sample
    bag does not simulate)."""
    names, labels = control_targets(model)
    specs = check_controls(adapter_parameters(path), names, labels, definitions_lookup()).raise_first()
    for spec in specs.values():
        if isinstance(spec, GoalStatusSpec):
            raise AdapterConfigError(f"{spec.param}: make-bag writes a control adapter that reads a message field (a "
                                     "velocity command); a Nav2 action's goal statuses are not simulated (leave this "
                                     "binding out of the file given to make-bag)")
    return specs


def store_lookup(store: Any) -> Lookup:
    """``adapters.schema``'s lookup from a rosbags typestore's field definitions (registering a package the store
    does not know from its installed ``.msg`` files). A type it has no definition of raises LookupError saying
    which package or message is missing and how to install it."""
    def field_type(desc: Any) -> FieldType:
        kind, spec = desc
        if kind == Nodetype.NAME:
            return FieldType("message", spec)
        if kind == Nodetype.BASE:
            base = spec[0]
            return FieldType("string" if base in ("string", "wstring") else "boolean" if base == "bool" else
                             "number" if base.startswith("float") else "other" if base in ("byte", "char") else
                             "integer")
        element = field_type(spec[0])
        return FieldType(element.kind, element.message, sequence=True)

    def lookup(typename: str) -> dict[str, FieldType]:
        package = typename.split("/")[0]
        try:
            register_installed(store, typename)
        except FileNotFoundError as exc:
            known = sorted(t.rsplit("/", 1)[-1] for t in store.types if t.startswith(f"{package}/msg/"))
            if known:
                raise LookupError(f"{package} has no message {typename.rsplit('/', 1)[-1]!r} (its messages: "
                                  f"{', '.join(known)})") from None
            raise LookupError(f"the message package {package!r} is not installed: {exc}; install it (rosdep "
                              f"install, or ros-<distro>-{package.replace('_', '-')}) and source its setup file") \
                from None
        return {name: field_type(desc) for name, desc in store.fielddefs[typename][1]}
    return lookup


def definitions_lookup() -> Lookup:
    """The message definitions available without ROS: rosbags' (ROS 2 Kilted) and the ``.msg`` files installed on
    AMENT_PREFIX_PATH."""
    return store_lookup(make_typestore())


def bag_topic(topic: str) -> str:
    """An adapter's (relative) topic as a bag topic under the root namespace."""
    return "/" + topic.strip("/")


def entry_maker(store: Any):
    """``new_entry(msg, field)`` for ``adapters.sampling``: a default entry of a sequence-of-messages field."""
    def new_entry(msg: Any, field: str) -> Any:
        _, fields = store.fielddefs[type(msg).__msgtype__]
        kind, spec = dict(fields)[field]
        (_, element), _ = spec
        return default_message(store, element)
    return new_entry


def step_messages(store: Any, specs: Mapping[str, AdapterSpec], levels: Sequence[int], stamp_ns: int,
                  rng: np.random.Generator) -> dict[str, Any]:
    """Bag topic -> the message of one step whose adapters read ``levels`` (one per modality, model order)."""
    out: dict[str, Any] = {}
    new_entry = entry_maker(store)
    for spec in sorted(specs.values(), key=lambda s: s.modality_index):
        topic = bag_topic(spec.topic)
        if topic not in out:
            register_installed(store, spec.type)
            out[topic] = default_message(store, spec.type)
            header = getattr(out[topic], "header", None)
            if header is not None:
                header.stamp.sec, header.stamp.nanosec = divmod(int(stamp_ns), 1_000_000_000)
        write_sample(out[topic], spec, int(levels[spec.modality_index]), rng, new_entry)
    return out


def control_messages(store: Any, specs: Mapping[str, ControlSpec], controls: Sequence[int], stamp_ns: int,
                     rng: np.random.Generator) -> dict[str, Any]:
    """Bag topic -> the command message of one transition whose control adapters read ``controls`` (one per factor,
    model order); a header (TwistStamped) is stamped ``stamp_ns``, a Twist has none (the node takes its arrival)."""
    return step_messages(store, {name: spec for name, spec in specs.items() if isinstance(spec, AdapterSpec)},
                         controls, stamp_ns, rng)


def topic_types(specs: Mapping[str, AdapterSpec]) -> dict[str, str]:
    """Bag topic -> message type; ValueError when two adapters give one topic two types."""
    out: dict[str, str] = {}
    for spec in specs.values():
        topic = bag_topic(spec.topic)
        if out.setdefault(topic, spec.type) != spec.type:
            raise ValueError(f"{spec.param}.type: topic {spec.topic!r} has two types ({out[topic]}, {spec.type})")
    return out
