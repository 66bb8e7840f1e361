"""Sensor messages for sample bags: each step's levels written as the messages a robot's drivers publish, through
the sensor adapters of a params file (``bayes-infer make-bag --adapters``), with rosbags (no rclpy).

Modalities that share a topic (a BatteryState's ``voltage`` and ``power_supply_status``) share one message per
step. Every other field keeps its type's default; ``header.stamp`` is the step's time. Values come from
``adapters.sampling`` (uniform within the level's bin), so the node's adapters read back the simulated level.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import yaml

from bayes_infer_ros.adapters import AdapterSpec, flatten, parse_adapters, sample_value
from bayes_infer_ros.model import GenerativeModel

from .convert import default_message

STEP_TOPICS_KEY = "step_topics"  # custom_data: the bag topics that make a step besides /observations/*


def load_adapters(path: os.PathLike, model: GenerativeModel) -> dict[str, AdapterSpec]:
    """The ``adapters.*`` parameters of a params file (every node section's ``ros__parameters``), checked
    against ``model``; AdapterConfigError names the parameter."""
    doc = yaml.safe_load(Path(path).read_text()) or {}
    params: dict[str, Any] = {}
    for section in doc.values():
        if isinstance(section, dict) and isinstance(section.get("ros__parameters"), dict):
            params.update(flatten(section["ros__parameters"]))
    names = [model.modality_name(i) for i in range(model.num_modalities)]
    labels = [model.observation_label_list(i) for i in range(model.num_modalities)]
    return parse_adapters(params, names, labels)


def bag_topic(topic: str) -> str:
    """An adapter's (relative) topic as a bag topic under the root namespace."""
    return "/" + topic.strip("/")


def set_field(msg: Any, path: str, value: Any) -> None:
    """``msg.<path> = value``, converted to the type the field holds (numpy arrays keep the field's dtype)."""
    *parents, last = path.split(".")
    for part in parents:
        msg = getattr(msg, part)
    current = getattr(msg, last)
    if isinstance(current, np.ndarray):
        value = np.asarray(value, dtype=current.dtype)
    elif isinstance(current, bool):
        value = bool(value)
    elif isinstance(current, (int, float, str)):
        value = type(current)(value)
    setattr(msg, last, value)


def step_messages(store: Any, specs: Mapping[str, AdapterSpec], levels: Sequence[int], stamp_ns: int,
                  rng: np.random.Generator) -> dict[str, Any]:
    """Bag topic -> the message of one step whose adapters read ``levels`` (one per modality, model order)."""
    out: dict[str, Any] = {}
    for spec in sorted(specs.values(), key=lambda s: s.modality_index):
        topic = bag_topic(spec.topic)
        if topic not in out:
            out[topic] = default_message(store, spec.type)
            header = getattr(out[topic], "header", None)
            if header is not None:
                header.stamp.sec, header.stamp.nanosec = divmod(int(stamp_ns), 1_000_000_000)
        set_field(out[topic], spec.field, sample_value(spec, int(levels[spec.modality_index]), rng))
    return out


def topic_types(specs: Mapping[str, AdapterSpec]) -> dict[str, str]:
    """Bag topic -> message type; ValueError when two adapters give one topic two types."""
    out: dict[str, str] = {}
    for spec in specs.values():
        topic = bag_topic(spec.topic)
        if out.setdefault(topic, spec.type) != spec.type:
            raise ValueError(f"{spec.param}.type: topic {spec.topic!r} has two types ({out[topic]}, {spec.type})")
    return out
