"""Write a simulated episode to a rosbag2 MCAP bag and read it back, with ``rosbags`` (no rclpy).

Bag layout (topic names are relative to the root namespace; ``bayes-infer replay --namespace`` moves them):

    at t_k = start + k * dt:
      /clock                      rosgraph_msgs/msg/Clock               first in the step
      /observations/<modality>    bayes_infer_ros/msg/CategoricalObservation   level = o_k[i], header.stamp = t_k
      /<adapter topic>            a sensor message (``make-bag --adapters``) that the modality's adapter reads as
                                  o_k[i], header.stamp = t_k; one per topic (``custom_data`` step_topics)
      /true_states                std_msgs/msg/Int32MultiArray          s_k (one level per factor)
    at t_k + dt/2 (k < T-1):
      /<control adapter topic>    a command (``make-bag --adapters`` with ``controls.<factor>``: a Twist on
                                  /cmd_vel) that the factor's control adapter reads as a_k[f]; ``custom_data``
                                  control_topics
      /controls                   bayes_infer_ros/msg/Controls          a_k, the controls applied between k and k+1,
                                                                        header.stamp = t_k + dt/2, with labels; left
                                                                        out when every controlled factor (more than
                                                                        one control) has a control adapter

The controls sit half a period after the step they follow, as a controller would issue them; their stamp lies in
[t_k, t_k+1), which is how the node puts them on the transition k -> k+1 whatever order they arrive in. Messages
of one log time are written, and read back, in the order above. Bags written before the Controls message carry
``/actions`` (std_msgs/Int32MultiArray, unstamped) instead; :func:`read_episode` reads both. ``metadata.yaml``'s ``custom_data`` records the generator, seed, step count, dt, factor/modality
names and the model's digest, so a test can tell a stale committed bag from a regenerated one.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Optional

import numpy as np
import yaml
from rosbags.rosbag2 import Reader, StoragePlugin, Writer

from bayes_infer_ros.adapters.controls import factor_index_of
from bayes_infer_ros.model import GenerativeModel, model_to_parameters

from .interfaces import (
    CLOCK_TYPE, CONTROLS_TYPE, INT32_MULTI_ARRAY_TYPE, OBSERVATION_TYPE, make_typestore, recorded_decoder,
    register_installed,
)
from .sensor_messages import CONTROL_TOPICS_KEY, STEP_TOPICS_KEY, control_messages, step_messages, topic_types
from .simulate import Rollout

CLOCK_TOPIC = "/clock"
CONTROLS_TOPIC = "/controls"
LEGACY_ACTIONS_TOPIC = "/actions"  # bags made before the Controls message
TRUE_STATES_TOPIC = "/true_states"
OBSERVATIONS_PREFIX = "/observations/"
GENERATOR = "bayes_infer_ros.bags v3"
# rosbag2 metadata version 8: the newest that Humble's, Jazzy's and Kilted's rosbag2 all read. Version 9 writes
# each topic's ``offered_qos_profiles`` as a YAML list, which Humble's reader takes as a string and fails on;
# from version 4 to 8 it is a string (empty: the player's default QoS). Humble ignores the newer fields
# (custom_data, ros_distro, type_description_hash). ``test/bags/test_bag_metadata.py`` reads it as each reader does.
METADATA_VERSION = 8


def model_digest(model: GenerativeModel) -> str:
    """sha256 of the model's canonical parameters (names, shapes, values): insensitive to YAML formatting."""
    text = json.dumps(model_to_parameters(model), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _stamp(store, ns: int):
    Time = store.types["builtin_interfaces/msg/Time"]
    return Time(sec=int(ns // 1_000_000_000), nanosec=int(ns % 1_000_000_000))


def _int_array(store, values, label: str):
    t = store.types
    values = np.asarray(values, dtype=np.int32)
    dim = t["std_msgs/msg/MultiArrayDimension"](label=label, size=int(values.size), stride=int(values.size))
    layout = t["std_msgs/msg/MultiArrayLayout"](dim=[dim], data_offset=0)
    return t[INT32_MULTI_ARRAY_TYPE](layout=layout, data=values)


def _controls(store, ns: int, indices, control_labels):
    """A Controls message stamped ``ns``: one index per factor, with the model's control labels when it has them."""
    t = store.types
    indices = np.asarray(indices, dtype=np.int32)
    labels = [str(control_labels[f][int(u)]) for f, u in enumerate(indices)] if control_labels else []
    return t[CONTROLS_TYPE](header=t["std_msgs/msg/Header"](stamp=_stamp(store, ns), frame_id=""),
                            indices=indices, labels=labels)


def write_episode_bag(
    path: os.PathLike,
    model: GenerativeModel,
    rollout: Rollout,
    *,
    dt_s: float = 0.1,
    start_ns: int = 1_000_000_000,
    custom_data: Optional[dict[str, str]] = None,
    adapters: Optional[Mapping] = None,
    sensor_seed: int = 0,
    probabilities: Optional[Mapping[tuple[int, int], np.ndarray]] = None,
    controls: Optional[Mapping] = None,
) -> Path:
    """Write ``rollout`` as an MCAP rosbag2 folder at ``path`` (which must not exist). Returns the folder.

    ``adapters`` (modality -> ``AdapterSpec``): those modalities are written as sensor messages on their
    adapters' topics (``sensor_messages.py``; values drawn with ``sensor_seed``) instead of
    ``/observations/<modality>``; ``custom_data["step_topics"]`` lists those topics. ``probabilities``
    ({(step, modality): (m_i,)}): those observations are sent as ``level`` -1 with these probabilities (soft
    evidence) instead of the rollout's level. ``controls`` (factor -> a control adapter's ``AdapterSpec``): those
    factors' controls are written as the commands the adapters read (values drawn with ``sensor_seed`` + 1), and
    ``/controls`` only while a factor with more than one control has no adapter."""
    path = Path(path)
    store = make_typestore()
    t = store.types
    dt_ns = int(round(dt_s * 1e9))
    modalities = [model.modality_name(i) for i in range(model.num_modalities)]
    factors = [model.factor_name(f) for f in range(model.num_factors)]
    control_labels = model.control_labels
    meta = {
        "generator": GENERATOR,
        "model_digest": model_digest(model),
        "num_steps": str(rollout.num_steps),
        "dt_ns": str(dt_ns),
        "start_ns": str(start_ns),
        "factors": ",".join(factors),
        "modalities": ",".join(modalities),
    }
    adapters = dict(adapters or {})
    sensor_types = topic_types(adapters)
    if sensor_types:
        meta[STEP_TOPICS_KEY] = ",".join(sorted(sensor_types))
    controls = dict(controls or {})
    command_types = topic_types(controls)
    if command_types:
        meta[CONTROL_TOPICS_KEY] = ",".join(sorted(command_types))
    bound = {factor_index_of(spec) for spec in controls.values()}
    write_controls = any(n > 1 and f not in bound for f, n in enumerate(model.num_controls))
    meta.update(custom_data or {})
    rng = np.random.default_rng(sensor_seed)
    command_rng = np.random.default_rng(sensor_seed + 1)

    with Writer(path, version=METADATA_VERSION, storage_plugin=StoragePlugin.MCAP) as writer:
        for key, value in meta.items():
            writer.set_custom_data(key, str(value))
        clock = writer.add_connection(CLOCK_TOPIC, CLOCK_TYPE, typestore=store)
        controls_conn = (writer.add_connection(CONTROLS_TOPIC, CONTROLS_TYPE, typestore=store)
                         if write_controls or not command_types else None)
        obs = [None if name in adapters else writer.add_connection(OBSERVATIONS_PREFIX + name, OBSERVATION_TYPE,
                                                                    typestore=store) for name in modalities]
        for msgtype in sensor_types.values():
            register_installed(store, msgtype)
        sensors = {topic: writer.add_connection(topic, msgtype, typestore=store)
                   for topic, msgtype in sorted(sensor_types.items())}
        for msgtype in command_types.values():
            register_installed(store, msgtype)
        commands = {topic: writer.add_connection(topic, msgtype, typestore=store)
                    for topic, msgtype in sorted(command_types.items())}
        truth = writer.add_connection(TRUE_STATES_TOPIC, INT32_MULTI_ARRAY_TYPE, typestore=store)
        empty = np.zeros(0, dtype=np.float32)
        for step in range(rollout.num_steps):
            ns = start_ns + step * dt_ns
            stamp = _stamp(store, ns)
            writer.write(clock, ns, store.serialize_cdr(t[CLOCK_TYPE](clock=stamp), CLOCK_TYPE))
            header = t["std_msgs/msg/Header"](stamp=stamp, frame_id="")
            for i, conn in enumerate(obs):
                if conn is not None:
                    soft = (probabilities or {}).get((step, i))
                    msg = t[OBSERVATION_TYPE](
                        header=header, level=-1 if soft is not None else int(rollout.observations[step, i]),
                        probabilities=empty if soft is None else np.asarray(soft, np.float32), label="")
                    writer.write(conn, ns, store.serialize_cdr(msg, OBSERVATION_TYPE))
            if sensors:
                for topic, msg in step_messages(store, adapters, rollout.observations[step], ns, rng).items():
                    writer.write(sensors[topic], ns, store.serialize_cdr(msg, sensor_types[topic]))
            msg = _int_array(store, rollout.states[step], "factors")
            writer.write(truth, ns, store.serialize_cdr(msg, INT32_MULTI_ARRAY_TYPE))
            if step + 1 < rollout.num_steps:
                half = ns + dt_ns // 2
                for topic, msg in control_messages(store, controls, rollout.actions[step], half, command_rng).items():
                    writer.write(commands[topic], half, store.serialize_cdr(msg, command_types[topic]))
                if controls_conn is not None:
                    msg = _controls(store, half, rollout.actions[step], control_labels)
                    writer.write(controls_conn, half, store.serialize_cdr(msg, CONTROLS_TYPE))
    return path


@dataclass
class Episode:
    """An episode read back from a bag (the inverse of :func:`write_episode_bag`).

    stamps_ns:    (T,)      log time of each step (= the observations' header stamps)
    states:       (T, F)    true states (-1 where a step had no ``/true_states`` message)
    observations: (T, M)    observed levels, modalities in ``modality_names`` order (-1: given as probabilities, or
                            as a sensor message on a ``step_topics`` topic, which is not decoded here)
    actions:      (T-1, F)  a_{t-1} as recorded at step t (-1 where missing: pymdp's "no action")
    probabilities: {(t, i): (m_i,) array} for observations sent as distributions (level == -1)
    """

    stamps_ns: np.ndarray
    states: np.ndarray
    observations: np.ndarray
    actions: np.ndarray
    factor_names: list[str]
    modality_names: list[str]
    custom_data: dict[str, str]
    probabilities: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)

    @property
    def num_steps(self) -> int:
        return int(self.stamps_ns.shape[0])


def step_topic_test(path: os.PathLike) -> Callable[[str], bool]:
    """Whether a topic of the bag at ``path`` carries a step's observations: ``/observations/*`` (also under a
    namespace) and the sensor topics that ``make-bag --adapters`` lists in ``custom_data`` (``step_topics``)."""
    sensors = set(filter(None, read_custom_data(path).get(STEP_TOPICS_KEY, "").split(",")))
    return lambda topic: OBSERVATIONS_PREFIX in topic or topic in sensors


def read_custom_data(path: os.PathLike) -> dict[str, str]:
    """``custom_data`` of a rosbag2 folder's ``metadata.yaml`` (empty when absent)."""
    doc = yaml.safe_load((Path(path) / "metadata.yaml").read_text()) or {}
    return {str(k): str(v) for k, v in (doc.get("rosbag2_bagfile_information", {}).get("custom_data") or {}).items()}


def read_episode(path: os.PathLike) -> Episode:
    """Read an episode bag. Steps are the distinct log times of the observation topics; ``/true_states``
    belongs to the step whose observations came last before it, a ``/controls`` (or legacy ``/actions``)
    message to the step before the next observations (the control taken between that step and the next)."""
    store = make_typestore()
    custom = read_custom_data(path)
    records = []
    sensor_topics = set(filter(None, custom.get(STEP_TOPICS_KEY, "").split(",")))
    decoders: dict[int, Callable[[bytes], object]] = {}
    with Reader(path) as reader:
        obs_topics = sorted(c.topic[len(OBSERVATIONS_PREFIX):] for c in reader.connections
                            if c.topic.startswith(OBSERVATIONS_PREFIX))
        for conn, ns, raw in reader.messages():
            if conn.topic in sensor_topics:
                records.append((ns, conn.topic, None))  # a sensor message: a step, its level left -1
            elif conn.topic.startswith(OBSERVATIONS_PREFIX) or conn.topic in (CONTROLS_TOPIC, LEGACY_ACTIONS_TOPIC,
                                                                               TRUE_STATES_TOPIC):
                if conn.id not in decoders:  # a bag written before a field was added keeps its own definition
                    decoders[conn.id] = recorded_decoder(conn.msgtype, conn.msgdef.data) or functools.partial(
                        store.deserialize_cdr, typename=conn.msgtype)
                records.append((ns, conn.topic, decoders[conn.id](raw)))
    modalities = custom["modalities"].split(",") if custom.get("modalities") else obs_topics
    factors = custom["factors"].split(",") if custom.get("factors") else []
    is_step = lambda topic: topic.startswith(OBSERVATIONS_PREFIX) or topic in sensor_topics  # noqa: E731
    stamps = sorted({ns for ns, topic, _ in records if is_step(topic)})
    T, M = len(stamps), len(modalities)
    F = len(factors) or next((len(m.data) for _, topic, m in records if topic == TRUE_STATES_TOPIC), 0)
    states = np.full((T, F), -1, dtype=np.int64)
    observations = np.full((T, M), -1, dtype=np.int64)
    actions = np.full((max(T - 1, 0), F), -1, dtype=np.int64)
    probabilities: dict[tuple[int, int], np.ndarray] = {}
    column = {name: i for i, name in enumerate(modalities)}
    step, step_ns = -1, None
    for ns, topic, msg in records:
        if is_step(topic):
            if ns != step_ns:
                step, step_ns = step + 1, ns
            i = column.get(topic[len(OBSERVATIONS_PREFIX):]) if msg is not None else None
            if i is None:
                continue
            observations[step, i] = int(msg.level)
            if msg.level < 0:
                probabilities[(step, i)] = np.asarray(msg.probabilities, dtype=np.float64)
        elif topic == TRUE_STATES_TOPIC and step >= 0:
            states[step] = np.asarray(msg.data, dtype=np.int64)
        elif topic == CONTROLS_TOPIC and 0 <= step < T - 1:
            actions[step] = np.asarray(msg.indices, dtype=np.int64)
        elif topic == LEGACY_ACTIONS_TOPIC and 0 <= step < T - 1:
            actions[step] = np.asarray(msg.data, dtype=np.int64)
    return Episode(stamps_ns=np.asarray(stamps, dtype=np.int64), states=states, observations=observations,
                   actions=actions, factor_names=factors, modality_names=modalities, custom_data=custom,
                   probabilities=probabilities)


def bag_content_digest(path: os.PathLike) -> str:
    """sha256 over every message's (topic, type, log time, raw CDR bytes) in bag order, and the custom data.

    Equal digests mean equal decoded content even if the container bytes differ (e.g. a different MCAP
    writer); the sample bag is also checked byte for byte."""
    h = hashlib.sha256()
    h.update(json.dumps(read_custom_data(path), sort_keys=True).encode())
    with Reader(path) as reader:
        for conn, ns, raw in reader.messages():
            h.update(f"{conn.topic}\0{conn.msgtype}\0{ns}\0".encode())
            h.update(bytes(raw))
    return h.hexdigest()
