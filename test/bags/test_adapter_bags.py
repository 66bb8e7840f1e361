"""Bags without ROS for the sensor and control adapters and the label field: ``make-bag --adapters`` writes the real
message types whose adapters read back the simulated levels (and the robot's commands, whose control adapters read back
the simulated controls), and a bag written before ``CategoricalObservation.label`` still reads (and converts to the
current definition for the replay)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import yaml
from rosbags.rosbag2 import Reader, StoragePlugin, Writer
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

from bayes_infer_ros.adapters import AdapterConfigError, read_control, read_level
from bayes_infer_ros.bags import make_typestore, read_custom_data, read_episode, simulate
from bayes_infer_ros.bags.interfaces import OBSERVATION_TYPE, current_cdr, recorded_decoder
from bayes_infer_ros.bags.make_bag import SAMPLE_SEED, SAMPLE_STEPS
from bayes_infer_ros.cli.make_bag import main as make_bag_main
from bayes_infer_ros.bags.sensor_messages import load_adapters, load_controls
from bayes_infer_ros.model import load_model
from optional_messages import (
    DETECTOR, VISION_MSGS, needs_vision_msgs, robot_adapters, robot_adapters_file,
)

# CategoricalObservation as it was before `label` (the committed sample bag had this until it was regenerated)
OLD_OBSERVATION = "std_msgs/Header header\nint32 level\nfloat32[] probabilities\n"


def test_make_bag_with_adapters_writes_sensor_messages_that_read_back_the_levels(tmp_path, repo_root):
    out = tmp_path / "sensors"
    assert make_bag_main([str(out), "--adapters", str(repo_root / "config" / "agent_adapters.yaml")]) == 0
    model = load_model(repo_root / "config" / "agent.yaml")
    specs = load_adapters(repo_root / "config" / "agent_adapters.yaml", model)
    rollout = simulate(model, SAMPLE_STEPS, SAMPLE_SEED)
    store = make_typestore()
    levels = {name: [] for name in specs}
    with Reader(out) as reader:
        types = {c.topic: c.msgtype for c in reader.connections}
        for conn, ns, raw in reader.messages():
            for name, spec in specs.items():
                if conn.topic == "/" + spec.topic:
                    msg = store.deserialize_cdr(raw, conn.msgtype)
                    if hasattr(msg, "header"):  # stamped with the step's time
                        assert msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec == ns
                    levels[name].append(read_level(msg, spec).level)
    assert types["/battery_state"] == "sensor_msgs/msg/BatteryState"
    assert types["/scan"] == "sensor_msgs/msg/LaserScan"
    assert types["/rfid/tag"] == "std_msgs/msg/String"
    assert not any(t.startswith("/observations/") for t in types)
    assert read_custom_data(out)["step_topics"] == "/battery_state,/rfid/tag,/scan"
    for name, spec in specs.items():  # binning recovers every simulated level
        np.testing.assert_array_equal(levels[name], rollout.observations[:, spec.modality_index], err_msg=name)
    episode = read_episode(out)
    categorical = read_episode(repo_root / "bags" / "agent_sample")
    np.testing.assert_array_equal(episode.stamps_ns, categorical.stamps_ns)
    np.testing.assert_array_equal(episode.states, categorical.states)
    np.testing.assert_array_equal(episode.actions, categorical.actions)


def test_make_bag_writes_every_new_sensor_type_that_reads_back_the_levels(tmp_path, repo_root):
    """config/robot_adapters.yaml: Odometry and Imu (norm), JointState by name (with sigma), Detection2DArray by
    class (max score, empty_value), LaserScan by angle with NaN, out-of-limit and infinite beams (REP 117),
    BatteryState, a door's Range; the motion's control as a Twist on cmd_vel (no Controls: every controlled factor has
    a control adapter), read back by controls.motion as the simulated controls. Without vision_msgs, the detector's
    modality is written as CategoricalObservation (optional_messages)."""
    model_file, adapters_file = repo_root / "config" / "robot.yaml", robot_adapters_file(repo_root, tmp_path)
    out = tmp_path / "robot"
    assert make_bag_main([str(out), "--model", str(model_file), "--adapters", str(adapters_file), "--steps", "120",
                          "--seed", "3"]) == 0
    model = load_model(model_file)
    specs = load_adapters(adapters_file, model)
    [(factor, command)] = load_controls(adapters_file, model).items()
    rollout = simulate(model, 120, 3)
    store = make_typestore()
    levels = {name: [] for name in specs}
    commanded = []
    seen = {"nan_beams": 0, "inf_beams": 0, "far_beams": 0, "other_joints": 0}
    if VISION_MSGS:
        seen.update(other_classes=0, no_person=0)
    with Reader(out) as reader:
        types = {c.topic: c.msgtype for c in reader.connections}
        for conn, _, raw in reader.messages():
            if conn.topic == "/" + command.topic:
                commanded.append(read_control(store.deserialize_cdr(raw, conn.msgtype), command).level)
            for name, spec in specs.items():
                if conn.topic != "/" + spec.topic:
                    continue
                msg = store.deserialize_cdr(raw, conn.msgtype)
                one_hot = dataclasses.replace(spec, sigma=None)  # the level of the value's own interval
                levels[name].append(read_level(msg, one_hot).level)
                if name == "obstacle_ahead":
                    seen["nan_beams"] += int(np.isnan(msg.ranges).sum())
                    seen["inf_beams"] += int(np.isinf(msg.ranges).sum())
                    seen["far_beams"] += int((msg.ranges > msg.range_max).sum() - np.isinf(msg.ranges).sum())
                if name == "gripper_width":
                    seen["other_joints"] += len(msg.name) - 1
                if name == "person_seen":
                    classes = [r.hypothesis.class_id for d in msg.detections for r in d.results]
                    seen["other_classes"] += sum(c != "person" for c in classes)
                    seen["no_person"] += "person" not in classes
    detector = ({"/detections": "vision_msgs/msg/Detection2DArray"} if VISION_MSGS else
                {f"/observations/{DETECTOR}": "bayes_infer_ros/msg/CategoricalObservation"})
    assert types == {"/odom": "nav_msgs/msg/Odometry", "/imu/data": "sensor_msgs/msg/Imu",
                     "/joint_states": "sensor_msgs/msg/JointState", "/scan": "sensor_msgs/msg/LaserScan",
                     "/battery_state": "sensor_msgs/msg/BatteryState", "/door/range": "sensor_msgs/msg/Range",
                     "/clock": "rosgraph_msgs/msg/Clock", "/cmd_vel": "geometry_msgs/msg/Twist",
                     "/true_states": "std_msgs/msg/Int32MultiArray", **detector}
    assert read_custom_data(out)["control_topics"] == "/cmd_vel"
    for name, spec in specs.items():
        np.testing.assert_array_equal(levels[name], rollout.observations[:, spec.modality_index], err_msg=name)
    f = model.factor_names.index(factor)
    np.testing.assert_array_equal(commanded, rollout.actions[:, f])
    assert set(commanded) == {0, 1}  # both controls were commanded
    assert all(count > 0 for count in seen.values()), seen


def test_a_bag_written_before_the_label_field_still_reads(tmp_path, repo_root):
    old_store = get_typestore(Stores.ROS2_KILTED)
    old_store.register(get_types_from_msg(OLD_OBSERVATION, OBSERVATION_TYPE))
    new = read_episode(repo_root / "bags" / "agent_sample")
    with Reader(repo_root / "bags" / "agent_sample") as reader, \
            Writer(tmp_path / "old", version=8, storage_plugin=StoragePlugin.MCAP) as writer:
        for key, value in read_custom_data(repo_root / "bags" / "agent_sample").items():
            writer.set_custom_data(key, value)
        conns = {c.id: writer.add_connection(c.topic, c.msgtype,
                                             typestore=old_store if c.msgtype == OBSERVATION_TYPE else make_typestore())
                 for c in reader.connections}
        store = make_typestore()
        for c, ns, raw in reader.messages():
            if c.msgtype == OBSERVATION_TYPE:
                msg = store.deserialize_cdr(raw, c.msgtype)
                raw = old_store.serialize_cdr(old_store.types[OBSERVATION_TYPE](
                    header=msg.header, level=msg.level, probabilities=msg.probabilities), OBSERVATION_TYPE)
            writer.write(conns[c.id], ns, raw)
    old = read_episode(tmp_path / "old")
    np.testing.assert_array_equal(old.observations, new.observations)
    np.testing.assert_array_equal(old.states, new.states)
    with Reader(tmp_path / "old") as reader:
        conn = next(c for c in reader.connections if c.msgtype == OBSERVATION_TYPE)
        assert recorded_decoder(conn.msgtype, conn.msgdef.data) is not None
        raw = next(raw for c, _, raw in reader.messages(connections=[conn]))
    upgraded = make_typestore().deserialize_cdr(current_cdr(conn.msgtype, conn.msgdef.data)(bytes(raw)),
                                                OBSERVATION_TYPE)
    assert upgraded.label == "" and upgraded.level == new.observations[0, 0]
    with Reader(repo_root / "bags" / "agent_sample") as reader:  # the current definition: nothing to convert
        conn = next(c for c in reader.connections if c.msgtype == OBSERVATION_TYPE)
        assert recorded_decoder(conn.msgtype, conn.msgdef.data) is None


@pytest.mark.parametrize("modality,keys,refusal", [
    pytest.param(DETECTOR, {"field": "detections.results"},
                 "adapters.person_seen.field: detections is a sequence of vision_msgs/msg/Detection2D messages",
                 marks=needs_vision_msgs),
    ("gripper_width", {"field": "name", "key_field": None, "key": None, "sigma": None, "reduction": "max"},
     "adapters.gripper_width.reduction: name holds strings; max needs numbers"),
    ("speed", {"type": "nosuch_msgs/msg/Odometry"},
     "adapters.speed.type: the message package 'nosuch_msgs' is not installed: nosuch_msgs/msg/Odometry: no "
     "nosuch_msgs/msg/*.msg under AMENT_PREFIX_PATH"),
])
def test_make_bag_refuses_an_adapter_its_type_cannot_feed(tmp_path, repo_root, modality, keys, refusal):
    bad = tmp_path / "bad.yaml"
    adapters = robot_adapters(repo_root)
    adapters[modality].update(keys)
    for key in [k for k, v in keys.items() if v is None]:
        del adapters[modality][key]
    bad.write_text(yaml.safe_dump({"/**": {"ros__parameters": {"adapters": adapters}}}))
    model = load_model(repo_root / "config" / "robot.yaml")
    with pytest.raises(AdapterConfigError) as err:
        load_adapters(bad, model)
    assert str(err.value).startswith(refusal), err.value


@pytest.mark.skipif(VISION_MSGS, reason="vision_msgs is installed: the refusal of a missing package is the "
                                        "nosuch_msgs case of test_make_bag_refuses_an_adapter_its_type_cannot_feed")
def test_make_bag_without_vision_msgs_refuses_the_detector_naming_the_parameter(tmp_path, repo_root, capsys):
    """Where vision_msgs is not installed, make-bag over config/robot_adapters.yaml says so, naming the detector's
    parameter and how to install it, and writes nothing."""
    out = tmp_path / "robot"
    assert make_bag_main([str(out), "--model", str(repo_root / "config" / "robot.yaml"), "--adapters",
                          str(repo_root / "config" / "robot_adapters.yaml")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("make-bag: AdapterConfigError: adapters.person_seen.type: the message package "
                          "'vision_msgs' is not installed"), err
    assert "rosdep install" in err and not out.exists()
