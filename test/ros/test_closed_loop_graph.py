"""Issue #42's Done criteria over DDS (loopback): a robot-shaped bag (``make-bag --adapters`` over config/robot.yaml
and config/robot_adapters.yaml: a Twist on cmd_vel, BatteryState, LaserScan, a door's Range, Odometry, Imu,
JointState) replayed through the node configured by those two files alone, no node written for it:

- the controlled factor's beliefs (and every factor's but the gripper's, whose reading is soft evidence: see
  test_adapters_graph.py) equal pymdp's with the controls binned from the bag's Twists;
- ``door_open`` fires on ``~/events`` on the tick where the door's belief crosses its threshold, stamped with that
  tick, and ``~/events/door_open`` (std_msgs/Bool, latched) holds its value;
- ``~/set_beliefs`` then a tick gives pymdp's posterior from the prior set;
- /diagnostics carries a status per modality and per control adapter, its ``hardware_id`` the input's topic.

Without vision_msgs the detector's modality is fed as CategoricalObservation (optional_messages). The same loop
without a graph: test/node/test_closed_loop.py."""
from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
import yaml

from belief_events import expected_events
from optional_messages import robot_adapters_file
from ros_harness import reliable_subscriptions, wait_for

pytestmark = pytest.mark.ros

STEPS, SEED = 40, 5  # seed 5: the door opens and closes within the first 40 steps
SOFT = "gripper"


def _twist_controls(bag, model) -> np.ndarray:
    """(T-1,) motion's control of each transition, read from the bag's Twists through controls.motion (the node's
    binning, on rosbags' messages)."""
    from rosbags.rosbag2 import Reader

    from bayes_infer_ros.adapters import read_control
    from bayes_infer_ros.bags import make_typestore
    from bayes_infer_ros.bags.sensor_messages import load_controls

    spec = load_controls(bag.parent / "robot_adapters.yaml", model)["motion"]
    store, out = make_typestore(), []
    with Reader(bag) as reader:
        for conn, _, raw in reader.messages():
            if conn.topic == "/" + spec.topic:
                out.append(read_control(store.deserialize_cdr(raw, conn.msgtype), spec).level)
    return np.asarray(out)


def _first_step(bag) -> dict:
    """The bag's first step's messages (its sensors, and /observations/* where a modality has no adapter): bag topic
    -> rclpy message."""
    from rclpy.serialization import deserialize_message
    from rosbags.rosbag2 import Reader

    from bayes_infer_ros.bags import read_custom_data
    from bayes_infer_ros.bags.convert import message_class

    topics = set(read_custom_data(bag)["step_topics"].split(","))
    first, out = None, {}
    with Reader(bag) as reader:
        for conn, ns, raw in reader.messages():
            if conn.topic in topics or conn.topic.startswith("/observations/"):
                first = ns if first is None else first
                if ns == first:
                    out[conn.topic] = deserialize_message(bytes(raw), message_class(conn.msgtype))
    return out


def test_a_robot_bag_closes_the_loop_through_the_shipped_configuration(ros_graph, probe, tmp_path, repo_root):
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from diagnostic_msgs.msg import DiagnosticArray
    from rosgraph_msgs.msg import Clock
    from std_msgs.msg import Bool

    from bayes_infer_ros.bags import read_episode, simulate
    from bayes_infer_ros.bags.make_bag import make_sample_bag
    from bayes_infer_ros.model import load_model
    from bayes_infer_ros.msg import BeliefEvent, Beliefs
    from bayes_infer_ros.srv import SetBeliefs
    from lab import pymdp_oracle as oracle
    from lab.agent_process import AgentProcess
    from lab.demo import align_beliefs
    from lab.golden_pymdp import pymdp_beliefs
    from lab.replay_session import ReplaySession
    from tolerances import ROS_FLOAT32_ATOL

    model_file = repo_root / "config" / "robot.yaml"
    adapters_file = tmp_path / "robot_adapters.yaml"  # as shipped (without the detector where vision_msgs is missing)
    adapters_file.write_text(robot_adapters_file(repo_root, tmp_path).read_text())
    bag = make_sample_bag(tmp_path / "robot", model_file, STEPS, SEED, adapters=adapters_file)
    model, episode = load_model(model_file), read_episode(bag)
    commanded = _twist_controls(bag, model)
    np.testing.assert_array_equal(commanded, simulate(model, STEPS, SEED).actions[:, 0])

    ns = f"/robot_loop_{os.getpid()}"
    first = _first_step(bag)
    sensor_topics = [ns + topic for topic in first]  # every step topic: reliable, so no step is lost under load
    params = yaml.safe_load(adapters_file.read_text())["/**"]["ros__parameters"]
    node = AgentProcess(model_file, parameters={
        "algorithm": "fpi", "variant": "baseline", "use_sim_time": True, "autostart": True, "rate_hz": 0.0,
        "observation_timeout": 0.0, "diagnostics_period": 0.2, "jax_compilation_cache_dir": str(tmp_path / "jax")},
        namespace=ns, env=dict(os.environ), log_path=tmp_path / "agent.log",
        extra_ros_args=["--params-file", str(adapters_file), "--params-file",
                        str(_qos_file(tmp_path, reliable_subscriptions(sensor_topics)))])
    events = probe.record(f"{ns}/agent/events", BeliefEvent, QoSProfile(depth=100,
                                                                         reliability=ReliabilityPolicy.RELIABLE))
    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    door_open = probe.record(f"{ns}/agent/events/door_open", Bool, latched)
    diagnostics = probe.record("/diagnostics", DiagnosticArray, 200)
    node.start()
    try:
        assert wait_for(lambda: bool(door_open) or not node.alive(), 180) and door_open, node.log_tail()
        assert door_open[-1][1].data is False  # latched False from configure on
        with ReplaySession(bag, namespace=ns, node_name="replay_robot_loop") as session:
            assert wait_for(lambda: session.wait_ready(1.0) or not node.alive(), 120) and node.alive(), \
                node.log_tail()
            stats = session.play(rate=0.0, wait_for="beliefs", wait_timeout=10.0)
            assert session.drain(STEPS, timeout=60.0), (stats.summary(), node.log_tail())
            samples = list(session.beliefs)
        assert stats.wait_timeouts == 0 and len(samples) == STEPS, (stats.summary(), node.log_tail())
        assert "unknown parameter" not in node.log_text(), node.log_tail()  # controls.* and events.* are read

        # 1. the beliefs: pymdp's with the controls binned from cmd_vel
        rollout = simulate(model, STEPS, SEED)
        actions = np.zeros((STEPS - 1, model.num_factors), np.int64)
        actions[:, model.factor_names.index("motion")] = commanded
        truth = dataclasses.replace(episode, observations=rollout.observations, actions=actions)
        want = pymdp_beliefs(model, truth, "fpi")
        got, seen = align_beliefs(samples, episode, model.num_states)
        assert seen.all()
        for f in range(model.num_factors):
            if model.factor_name(f) != SOFT:
                np.testing.assert_allclose(got[f], want[f], rtol=0, atol=ROS_FLOAT32_ATOL, err_msg=model.factor_name(f))

        # 2. door_open on the tick that crossed, stamped with it; the Bool holds the last value
        door = model.factor_names.index("door")
        spec = params["events"]["door_open"]
        expected = expected_events(want[door][:, 1], episode.stamps_ns, spec["above"], spec["hysteresis"])
        assert len(expected) >= 2, expected
        fired = lambda: [(m.value, m.header.stamp.sec * 10**9 + m.header.stamp.nanosec)  # noqa: E731
                         for _, m in list(events) if m.name == "door_open"]
        assert wait_for(lambda: len(fired()) >= len(expected), 30), (fired(), expected)
        assert fired() == expected
        assert all(m.factor == "door" and m.level == "open" for _, m in events if m.name == "door_open")
        assert wait_for(lambda: door_open[-1][1].data is expected[-1][0], 30)

        # 3. ~/set_beliefs, then one tick (the first step's readings again, later): pymdp's posterior from that prior
        request = SetBeliefs.Request(factors=list(model.factor_names), levels=["stopped", "", "absent", "", "open"],
                                     probabilities=[0.5, 0.5, 0.2, 0.8])
        answer = probe.call(SetBeliefs, f"{ns}/agent/set_beliefs", request)
        assert answer.success, answer.message
        bad = probe.call(SetBeliefs, f"{ns}/agent/set_beliefs", SetBeliefs.Request(factors=["door"], levels=["ajar"]))
        assert not bad.success and bad.message.startswith("factor 'door': level 'ajar' is not one of its levels")
        later = int(episode.stamps_ns[-1]) + 100_000_000
        beliefs = probe.record(f"{ns}/beliefs", Beliefs, QoSProfile(
            depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL))
        assert wait_for(lambda: len(beliefs) >= 1, 30)  # the latched last one
        before = len(beliefs)
        clock = probe.publisher("/clock", Clock)
        clock.publish(Clock(clock=_time(later)))
        pubs = {topic: probe.publisher(ns + topic, type(msg), 10) for topic, msg in first.items()}
        assert wait_for(lambda: all(p.get_subscription_count() >= 1 for p in pubs.values()), 30)
        for topic, msg in first.items():
            msg.header.stamp = _time(later)
            pubs[topic].publish(msg)
        assert wait_for(lambda: len(beliefs) > before, 60), node.log_tail()
        tick = beliefs[-1][1]
        assert tick.header.stamp.sec * 10**9 + tick.header.stamp.nanosec == later
        prior = [np.float32([1, 0]), np.float32([0.5, 0.5]), np.float32([1, 0]), np.float32([0.2, 0.8]),
                 np.float32([0, 1])]
        obs = [np.eye(m, dtype=np.float32)[o] for m, o in zip(model.num_obs, rollout.observations[0])]
        posterior = oracle.run_fpi(oracle.as_jax([np.asarray(a, np.float32) for a in model.A]), oracle.as_jax(obs),
                                   oracle.as_jax(prior), model.A_dependencies, 16)
        for f, belief in enumerate(tick.factors):
            if model.factor_name(f) != SOFT:
                np.testing.assert_allclose(belief.probabilities, np.asarray(posterior[f]), rtol=0,
                                           atol=ROS_FLOAT32_ATOL, err_msg=model.factor_name(f))

        # 4. /diagnostics: a status per modality and control adapter, hardware_id its topic
        wanted = {f"{ns}/agent: {model.modality_name(i)}" for i in range(model.num_modalities)}
        wanted.add(f"{ns}/agent: controls.motion")

        def statuses() -> dict:
            return {s.name: s for _, arr in list(diagnostics)[-20:] for s in arr.status if s.name.startswith(ns)}

        assert wait_for(lambda: wanted <= set(statuses()), 30), sorted(statuses())
        named = statuses()
        adapters = params["adapters"]
        for name, keys in adapters.items():
            status = named[f"{ns}/agent: {name}"]
            assert status.hardware_id == f"{ns}/{keys['topic']}", (name, status.hardware_id)
            assert {kv.key: kv.value for kv in status.values}["type"] == keys["type"]
        assert named[f"{ns}/agent: controls.motion"].hardware_id == f"{ns}/cmd_vel"
        control = {kv.key: kv.value for kv in named[f"{ns}/agent: controls.motion"].values}
        assert int(control["accepted"]) == STEPS - 1 and control["type"] == "geometry_msgs/msg/Twist"
        assert f"{ns}/agent: inference" in named
    finally:
        node.stop()


def _qos_file(folder, overrides: dict):
    path = folder / "qos.yaml"
    path.write_text(yaml.safe_dump({"/**": {"ros__parameters": {"qos_overrides": overrides}}}))
    return path


def _time(stamp_ns: int):
    from builtin_interfaces.msg import Time

    sec, nanosec = divmod(int(stamp_ns), 1_000_000_000)
    return Time(sec=sec, nanosec=nanosec)
