"""Sensor adapters through the node over real DDS (loopback): every tested message type read by the node's adapter
code, a node fed by sensor messages whose bad values are refused and counted in /diagnostics, a configure refused
by a bad adapter (naming the parameter), and the adapter bag (``make-bag --adapters``) replayed through the
adapters with the same beliefs and accuracy as the categorical sample bag."""
from __future__ import annotations

import math
import os
import time

import numpy as np
import pytest
import yaml

from optional_messages import VISION_MSGS, needs_vision_msgs, robot_adapters, robot_adapters_file
from ros_harness import AgentProcess, default_params, reliable_subscriptions, wait_for

pytestmark = pytest.mark.ros

ADAPTERS_FILE = "config/agent_adapters.yaml"
# "The same accuracy as the categorical bag": within one percentage point per factor.
ACCURACY_POINT = 0.01


def shipped_adapters(repo_root) -> dict:
    return yaml.safe_load((repo_root / ADAPTERS_FILE).read_text())["/**"]["ros__parameters"]["adapters"]


# ---- the node's adapter code on the real message classes ------------------------------------------------
def _adapters(modality: str, **keys):
    from bayes_infer_ros.adapters import AdapterConfigError  # noqa: F401  (re-raised by the constructor)
    from bayes_infer_ros.model import load_model
    from bayes_infer_ros.ros.adapter_inputs import AdapterInputs

    from ros_harness import REPO_ROOT

    model = load_model(REPO_ROOT / "config" / "agent.yaml")
    return AdapterInputs.from_parameters({f"adapters.{modality}.{k}": v for k, v in keys.items()}, model)


TYPE_CASES = [
    ("sensor_msgs/msg/BatteryState", "voltage", 24.0, {"bins": [20.0, 23.0, 25.0, 29.4],
                                                        "bin_levels": ["low", "medium", "high"]}, 1),
    ("sensor_msgs/msg/BatteryState", "power_supply_status", 4, {"levels.high": [4], "levels.low": [2, 3]}, 0),
    ("sensor_msgs/msg/Range", "range", 0.3, {"bins": [0.0, 1.0, 2.0, 3.0]}, 0),
    ("sensor_msgs/msg/Temperature", "temperature", 61.5, {"bins": [-40.0, 40.0, 60.0, 120.0]}, 2),
    ("std_msgs/msg/Bool", "data", False, {"levels.high": True, "levels.low": False}, 2),
    ("std_msgs/msg/Int32", "data", -3, {"levels": [-3, 0, 3]}, 0),
    ("std_msgs/msg/Float32", "data", 2.5, {"bins": [0.0, 1.0, 2.0, 3.0]}, 2),
    ("std_msgs/msg/Float64", "data", 1.5, {"bins": [0.0, 1.0, 2.0, 3.0]}, 1),
    ("std_msgs/msg/String", "data", "ok", {"levels.high": "ok", "levels.low": ["fault", "low"]}, 0),
]


def test_the_cases_cover_every_tested_type():
    from bayes_infer_ros.adapters import TESTED_TYPES

    # LaserScan: test_laser_scan_*; the selections and vectors: test_selection_and_vectors_on_the_real_messages
    others = {"sensor_msgs/msg/LaserScan", "sensor_msgs/msg/JointState", "vision_msgs/msg/Detection2DArray",
              "sensor_msgs/msg/Imu", "nav_msgs/msg/Odometry"}
    assert {case[0] for case in TYPE_CASES} | others == set(TESTED_TYPES)


@pytest.mark.parametrize("msg_type,field,value,keys,level", TYPE_CASES)
def test_every_tested_message_type_is_read(ros_graph, msg_type, field, value, keys, level):
    inputs = _adapters("voltage", topic="sensor", type=msg_type, field=field, **keys)
    cls, topic = inputs.subscription(1, "voltage", object)
    assert topic == "sensor" and f"{cls.__module__.split('.')[0]}/msg/{cls.__name__}" == msg_type
    msg = cls()
    setattr(msg, field, value)
    if msg_type == "sensor_msgs/msg/Range":  # REP 117: the range is read within the sensor's limits
        msg.min_range, msg.max_range = 0.05, 4.0
    if hasattr(msg, "header"):
        msg.header.stamp.sec, msg.header.stamp.nanosec = 12, 34
    got = inputs.observation(1, msg)
    assert got["refused"] is None and got["level"] == level, got
    assert (got["sec"], got["nanosec"]) == ((12, 34) if hasattr(msg, "header") else (0, 0))  # else: arrival time


def test_laser_scan_reduction_on_the_real_message(ros_graph, repo_root):
    keys = {k: v for k, v in shipped_adapters(repo_root)["lidar_gap"].items()}
    inputs = _adapters("lidar_gap", **keys)
    cls, _ = inputs.subscription(2, "lidar_gap", object)
    scan = cls(angle_min=-math.pi, angle_increment=2 * math.pi / 360, range_min=0.1, range_max=20.0)
    scan.ranges = [0.3] * 140 + [5.0] * 80 + [0.3] * 140  # walls outside the door's sector (+-30 degrees), a gap in it
    assert inputs.observation(2, scan)["level"] == 0      # gap
    scan.ranges = [5.0] * 180 + [0.6] + [5.0] * 179
    assert inputs.observation(2, scan)["level"] == 1      # wall
    scan.ranges = [5.0] * 100                             # no beam in the sector
    assert inputs.observation(2, scan)["refused"][0] == "missing_field"


def _detections(*found):
    """A Detection2DArray with one detection per (class_id, score) of ``found``."""
    from vision_msgs.msg import Detection2D, Detection2DArray, ObjectHypothesisWithPose

    out = Detection2DArray()
    for class_id, score in found:
        result = ObjectHypothesisWithPose()
        result.hypothesis.class_id, result.hypothesis.score = class_id, score
        out.detections.append(Detection2D(results=[result]))
    return out


def test_selection_and_vectors_on_the_real_messages(ros_graph):
    """JointState by name and by index, the norm of Imu's and Odometry's vectors: the node's adapter code on the
    generated classes (Detection2DArray: the next test)."""
    from nav_msgs.msg import Odometry
    from sensor_msgs.msg import Imu, JointState

    joints = JointState(name=["wheel", "gripper", "lift"], position=[3.0, 0.02, 0.4])
    by_name = _adapters("voltage", topic="joint_states", type="sensor_msgs/msg/JointState", field="position",
                        key_field="name", key="gripper", bins=[0.0, 0.01, 0.05, 0.1])
    assert by_name.observation(1, joints)["level"] == 1
    assert by_name.observation(1, JointState(name=["wheel"], position=[0.0]))["refused"][0] == "no_match"
    assert by_name.observation(1, JointState(name=["gripper"], position=[]))["refused"][0] == "missing_field"
    by_index = _adapters("voltage", topic="joint_states", type="sensor_msgs/msg/JointState", field="position[2]",
                         bins=[0.0, 0.1, 0.5, 1.0])
    assert by_index.observation(1, joints)["level"] == 1
    assert by_index.observation(1, JointState(position=[0.0]))["refused"][0] == "missing_field"

    imu = Imu()
    imu.linear_acceleration.x, imu.linear_acceleration.y, imu.linear_acceleration.z = 3.0, 4.0, 12.0  # norm 13
    shaking = _adapters("lidar_gap", topic="imu", type="sensor_msgs/msg/Imu", field="linear_acceleration",
                        reduction="norm", bins=[0.0, 11.0, math.inf])
    assert shaking.observation(2, imu)["level"] == 1
    odom = Odometry()
    odom.twist.twist.linear.x, odom.twist.twist.linear.y = 0.3, -0.4  # 0.5 m/s
    speed = _adapters("voltage", topic="odom", type="nav_msgs/msg/Odometry", field="twist.twist.linear",
                      reduction="norm", bins=[0.0, 0.05, 0.4, math.inf])
    assert speed.observation(1, odom)["level"] == 2


@needs_vision_msgs
def test_detections_by_class_on_the_real_message(ros_graph):
    """Detection2DArray by class (highest score, present above a score) and by index, on the generated class
    (without vision_msgs, test/adapters runs the same path logic on objects of the message's layout)."""
    score = dict(topic="detections", type="vision_msgs/msg/Detection2DArray",
                 field="detections[].results[].hypothesis.score", key_field="detections[].results[].hypothesis.class_id",
                 key="person", reduction="max", bins=[0.0, 0.5, 1.0], bin_levels=["gap", "wall"])
    highest = _adapters("lidar_gap", **score)
    assert highest.observation(2, _detections(("person", 0.3), ("chair", 0.9), ("person", 0.7)))["level"] == 1
    assert highest.observation(2, _detections(("person", 0.3), ("chair", 0.9)))["level"] == 0
    assert highest.observation(2, _detections(("chair", 0.9)))["refused"][0] == "no_match"
    present = _adapters("lidar_gap", **score, empty_value=0.0)
    assert present.observation(2, _detections(("chair", 0.9)))["level"] == 0  # no person: score 0, absent
    assert present.observation(2, _detections())["level"] == 0
    first = _adapters("lidar_gap", topic="detections", type="vision_msgs/msg/Detection2DArray",
                      field="detections[0].results[0].hypothesis.class_id", **{"levels.gap": "chair", "levels.wall": "person"})
    assert first.observation(2, _detections(("person", 0.3)))["level"] == 1


def test_laser_scan_rep_117_on_the_real_message(ros_graph):
    """NaN beams skipped, +inf beyond range_max, -inf below range_min, beams outside the limits skipped, the
    sector by angle in the scan's frame."""
    from sensor_msgs.msg import LaserScan

    inputs = _adapters("lidar_gap", topic="scan", type="sensor_msgs/msg/LaserScan", field="ranges", reduction="min",
                       angle_range=[-0.5, 0.5], bins=[-math.inf, 1.0, math.inf], bin_levels=["wall", "gap"])
    scan = LaserScan(angle_min=-math.pi, angle_increment=2 * math.pi / 360, range_min=0.2, range_max=12.0)
    ahead = np.abs(-math.pi + np.arange(360) * 2 * math.pi / 360) <= 0.5
    ranges = np.full(360, 0.5, np.float32)  # walls everywhere but ahead
    ranges[ahead] = 3.0
    ranges[ahead.nonzero()[0][::3]] = np.nan    # NaN beams: skipped
    ranges[ahead.nonzero()[0][1::7]] = 0.1      # below range_min: skipped
    ranges[ahead.nonzero()[0][2::5]] = 50.0     # beyond range_max: skipped
    scan.ranges = ranges.tolist()
    gap, wall = 0, 1                                   # the modality's labels: [gap, wall]
    assert inputs.observation(2, scan)["level"] == gap  # min 3.0 m ahead
    ranges[ahead] = np.inf                             # no return ahead: beyond range_max, a gap
    scan.ranges = ranges.tolist()
    assert inputs.observation(2, scan)["level"] == gap
    ranges[ahead.nonzero()[0][4]] = -np.inf           # something closer than range_min: a wall
    scan.ranges = ranges.tolist()
    assert inputs.observation(2, scan)["level"] == wall
    ranges[ahead] = np.nan
    scan.ranges = ranges.tolist()
    assert inputs.observation(2, scan)["refused"][0] == "non_finite"
    ranges[ahead] = 40.0
    scan.ranges = ranges.tolist()
    assert inputs.observation(2, scan)["refused"][0] == "out_of_limits"
    rng = _adapters("lidar_gap", topic="range", type="sensor_msgs/msg/Range", field="range",
                    bins=[-math.inf, 1.0, math.inf], bin_levels=["wall", "gap"])
    from sensor_msgs.msg import Range
    assert rng.observation(2, Range(range=math.inf, min_range=0.1, max_range=4.0))["level"] == gap
    assert rng.observation(2, Range(range=-math.inf, min_range=0.1, max_range=4.0))["level"] == wall
    assert rng.observation(2, Range(range=5.0, min_range=0.1, max_range=4.0))["refused"][0] == "out_of_limits"


def test_soft_evidence_goes_to_admission_as_probabilities(ros_graph):
    from scipy.stats import norm
    from sensor_msgs.msg import BatteryState

    from tolerances import FLOAT64_ATOL

    inputs = _adapters("voltage", topic="battery_state", type="sensor_msgs/msg/BatteryState", field="voltage",
                       bins=[20.0, 23.0, 25.0, 29.4], bin_levels=["low", "medium", "high"], sigma=0.5)
    msg = BatteryState(voltage=22.9)
    got = inputs.observation(1, msg)
    cdf = norm.cdf([23.0, 25.0], loc=msg.voltage, scale=0.5)   # low, medium, high: the open tails
    expected = [1 - cdf[1], cdf[1] - cdf[0], cdf[0]]                         # labels high, medium, low
    assert got["level"] == -1 and got["refused"] is None
    np.testing.assert_allclose(got["probabilities"], expected, rtol=0, atol=FLOAT64_ATOL)
    confusion = _adapters("charging", topic="battery_state", type="sensor_msgs/msg/BatteryState",
                          field="power_supply_status", **{"levels.charging": [1, 4], "levels.idle": [2, 3]},
                          **{"confusion.charging": [0.9, 0.1]})
    assert confusion.observation(3, BatteryState(power_supply_status=4))["probabilities"] == (0.9, 0.1)
    assert confusion.observation(3, BatteryState(power_supply_status=2))["level"] == 1  # no row: one-hot


def test_every_line_of_readmes_adapter_table_works_on_its_message_type(ros_graph, repo_root):
    """README's "Sensor adapters" table: each one-line adapter parses and fits its type's definition."""
    import re

    from bayes_infer_ros.adapters import PARAMETER_HELP, parse_adapters
    from bayes_infer_ros.model.io import flatten_parameters as flatten
    from bayes_infer_ros.ros.adapter_inputs import AdapterInputs

    readme = (repo_root / "README.md").read_text()
    section = readme[readme.index("**Sensor adapters.**"):readme.index("### Many agents in one node")]
    rows = re.findall(r"`(\{[^`]*\})`", section)  # one adapter per type, three types to a row of the table
    assert len(rows) == 9, rows
    for line in rows:
        keys = flatten(yaml.safe_load(line))
        levels = keys.get("bin_levels") or [k.split(".", 1)[1] for k in keys if k.startswith("levels.")] or \
            [str(k) for k in range(len(keys["bins"]) - 1)]
        specs = parse_adapters({f"adapters.m.{k}": v for k, v in keys.items()}, ["m"], [levels])
        if keys["type"].startswith("vision_msgs/") and not VISION_MSGS:
            continue  # parsed; its fit to the type needs vision_msgs installed (optional_messages)
        AdapterInputs(specs)  # the type is installed and the adapter fits it
    for key, _ in PARAMETER_HELP:
        assert f"`{key}`" in section, key


def test_a_type_is_checked_against_the_installed_packages_before_any_import(ros_graph):
    """``type: this/msg/Foo`` is refused without importing Python's ``this`` (its side effect would show in the
    log): the ament index is asked first."""
    import sys

    from bayes_infer_ros.adapters import AdapterConfigError

    sys.modules.pop("this", None)
    with pytest.raises(AdapterConfigError) as err:
        _adapters("voltage", topic="t", type="this/msg/Foo", field="data", bins=[0.0, 1.0])
    assert str(err.value).startswith("adapters.voltage.type: no message package 'this' is installed"), err.value
    assert "this" not in sys.modules


@pytest.mark.parametrize("keys,param", [
    ({"type": "sensor_msgs/msg/NoSuchMessage", "field": "voltage", "bins": [0.0, 1.0]}, "adapters.voltage.type"),
    ({"type": "diagnostic_msgs/msg/DiagnosticArray", "field": "status", "levels": [0, 1]}, "adapters.voltage.field"),
    ({"type": "diagnostic_msgs/msg/DiagnosticArray", "field": "status.level", "levels": [0, 1]},
     "adapters.voltage.field"),
    ({"type": "sensor_msgs/msg/JointState", "field": "name", "levels": ["a", "b"]}, "adapters.voltage.reduction"),
    ({"type": "sensor_msgs/msg/JointState", "field": "name", "reduction": "max", "bins": [0.0, 1.0]},
     "adapters.voltage.reduction"),
    ({"type": "sensor_msgs/msg/JointState", "field": "position", "key_field": "header.frame_id", "key": "x",
      "bins": [0.0, 1.0]}, "adapters.voltage.key_field"),
    ({"type": "sensor_msgs/msg/Imu", "field": "orientation_covariance", "reduction": "norm", "bins": [0.0, 1.0]},
     None),  # a float64[9] is a vector of numbers: accepted
    ({"type": "sensor_msgs/msg/Imu", "field": "header", "reduction": "norm", "bins": [0.0, 1.0]},
     "adapters.voltage.reduction"),
    pytest.param({"type": "vision_msgs/msg/Detection2DArray", "field": "detections.results", "levels": [0, 1]},
                 "adapters.voltage.field", marks=needs_vision_msgs),
    ({"type": "nosuch_msgs/msg/Battery", "field": "voltage", "bins": [0.0, 1.0]}, "adapters.voltage.type"),
    ({"type": "sensor_msgs/msg/BatteryState", "field": "volts", "bins": [0.0, 1.0]}, "adapters.voltage.field"),
    ({"type": "sensor_msgs/msg/LaserScan", "field": "ranges", "bins": [0.0, 1.0]}, "adapters.voltage.reduction"),
])
def test_configuration_errors_against_the_message_classes(ros_graph, keys, param):
    from bayes_infer_ros.adapters import AdapterConfigError

    if param is None:
        _adapters("voltage", topic="battery_state", **keys)
        return
    with pytest.raises(AdapterConfigError) as err:
        _adapters("voltage", topic="battery_state", **keys)
    assert str(err.value).startswith(param), str(err.value)


# ---- a node fed by sensor messages ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def sensor_agent(ros_graph, tmp_path_factory, repo_root):
    tmp = tmp_path_factory.mktemp("adapters")
    params = default_params()
    params.update({"adapters": shipped_adapters(repo_root), "autostart": True, "rate_hz": 0.0,
                   "variant": "baseline", "observation_timeout": 0.0, "diagnostics_period": 0.1,
                   "jax_compilation_cache_dir": ros_graph["jax_cache"],
                   # bad values are counted exactly: no message of the probe's may be lost
                   "qos_overrides": reliable_subscriptions(["/sensors/battery_state", "/sensors/scan",
                                                            "/sensors/rfid/tag"])})
    proc = AgentProcess(tmp, "agent", params, namespace="/sensors")
    yield proc
    proc.stop()


def _diag_values(diags, fqn="/sensors/agent"):
    for _, arr in reversed(list(diags)):
        for st in arr.status:
            if st.name == f"{fqn}: inference":
                return {kv.key: kv.value for kv in st.values}
    return {}


def test_the_node_reads_sensor_messages_and_counts_bad_values(probe, sensor_agent):
    from diagnostic_msgs.msg import DiagnosticArray
    from sensor_msgs.msg import BatteryState, LaserScan
    from std_msgs.msg import String

    from bayes_infer_ros.msg import Beliefs

    beliefs = probe.record("/sensors/beliefs", Beliefs)
    diags = probe.record("/diagnostics", DiagnosticArray)
    pubs = {"battery": probe.publisher("/sensors/battery_state", BatteryState),
            "scan": probe.publisher("/sensors/scan", LaserScan), "tag": probe.publisher("/sensors/rfid/tag", String)}
    wanted = {"battery": 2, "scan": 1, "tag": 1}  # voltage and charging read the same topic
    ready = lambda: (all(pubs[k].get_subscription_count() >= n for k, n in wanted.items())  # noqa: E731
                     or not sensor_agent.alive())
    assert wait_for(ready, 120) and sensor_agent.alive(), sensor_agent.log_tail()
    assert pubs["battery"].get_subscription_count() == 2

    def battery(voltage, status):
        msg = BatteryState(voltage=voltage, power_supply_status=status)
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(time.time_ns(), 1_000_000_000)
        return msg

    def scan(closest):
        msg = LaserScan(ranges=[5.0] * 150 + [closest] * 60 + [5.0] * 150, angle_min=-math.pi,
                        angle_increment=2 * math.pi / 360, range_min=0.1, range_max=20.0)
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(time.time_ns(), 1_000_000_000)
        return msg

    def step(voltage=27.0, status=1, closest=0.5, tag="CHARGER-02"):
        n = len(beliefs)
        pubs["battery"].publish(battery(voltage, status))
        pubs["scan"].publish(scan(closest))
        pubs["tag"].publish(String(data=tag))
        return beliefs[-1][1] if wait_for(lambda: len(beliefs) > n, 10) else None

    got = None
    for _ in range(5):  # the first messages may go out before the node's readers matched
        got = step()
        if got is not None:
            break
    assert got is not None, sensor_agent.log_tail()
    for _ in range(5):
        got = step()
    assert got.factors[0].most_likely_label == "charger"  # the tag CHARGER-02
    assert wait_for(lambda: all(int(_diag_values(diags).get(f"input.{m}.accepted", 0)) >= 6
                                for m in ("rfid_tag", "voltage", "lidar_gap", "charging")), 10), _diag_values(diags)

    before = _diag_values(diags)
    pubs["battery"].publish(battery(math.nan, 1))       # voltage NaN: refused; charging reads this message fine
    pubs["battery"].publish(battery(31.0, 0))           # out of the bins; status UNKNOWN: no level lists 0
    pubs["tag"].publish(String(data="PALLET-9"))        # an unknown tag
    pubs["scan"].publish(LaserScan(ranges=[1.0] * 10, angle_min=-0.05, angle_increment=0.01,
                                   angle_max=0.04))  # every beam in the sector, outside the limits [0, 0]
    pubs["scan"].publish(LaserScan(ranges=[1.0] * 10))  # angle_increment 0: no geometry (bad_geometry)
    expected = {"rejected.non_finite": 1, "rejected.out_of_bins": 1, "rejected.unknown_value": 2,
                "rejected.out_of_limits": 1, "rejected.bad_geometry": 1}

    def counted():
        now = _diag_values(diags)
        return all(int(now.get(k, 0)) - int(before.get(k, 0)) == v for k, v in expected.items())

    assert wait_for(counted, 30), (_diag_values(diags), before, sensor_agent.log_tail())
    assert sensor_agent.alive()
    assert step() is not None  # still ticking on good messages


def test_a_bad_adapter_refuses_configure_naming_the_parameter(ros_graph, tmp_path, repo_root):
    params = default_params()
    adapters = shipped_adapters(repo_root)
    adapters["voltage"]["bins"] = [20.0, 25.0, 23.0, 29.4]
    params.update({"adapters": adapters, "variant": "baseline", "jax_compilation_cache_dir": ros_graph["jax_cache"]})
    proc = AgentProcess(tmp_path, "agent", params, namespace="/bad_adapter", plain=True)
    try:
        assert wait_for(lambda: not proc.alive(), 120), proc.log_tail()
        assert proc.proc.returncode == 1, (proc.proc.returncode, proc.log_text())
        assert "adapters.voltage.bins: edges must be strictly ascending" in proc.log_text(), proc.log_tail()
    finally:
        proc.stop()


# ---- the adapter bag replays like the categorical one ---------------------------------------------------------
def _replay(bag, params_files, tmp_path, tag):
    from lab.agent_process import AgentProcess as Agent
    from lab.replay_session import ReplaySession

    ns = f"adapters_{tag}_{os.getpid()}"
    node = Agent(params_files[0], parameters={"algorithm": "fpi", "variant": "baseline", "use_sim_time": True,
                                              "autostart": True, "rate_hz": 0.0, "observation_timeout": 0.0,
                                              "jax_compilation_cache_dir": str(tmp_path / "jax")},
                 namespace=ns, env=dict(os.environ), log_path=tmp_path / f"agent_{tag}.log",
                 extra_ros_args=[a for f in params_files[1:] for a in ("--params-file", str(f))])
    node.start()
    try:
        with ReplaySession(bag, namespace=ns, node_name=f"replay_{tag}") as session:
            deadline = time.monotonic() + 120
            while not session.wait_ready(1.0):
                assert node.alive(), node.log_tail()
                assert time.monotonic() < deadline, node.log_tail()
            stats = session.play(rate=0.0, wait_for="beliefs", wait_timeout=10.0)
            session.drain(stats.steps, timeout=60.0)
            return stats, list(session.beliefs), node.log_text()
    finally:
        node.stop()


def test_the_adapter_bag_replays_with_the_categorical_bags_accuracy(ros_graph, tmp_path, repo_root):
    from bayes_infer_ros.bags import read_episode
    from bayes_infer_ros.bags.golden import posterior_mode_accuracy
    from bayes_infer_ros.cli.make_bag import main as make_bag_main
    from lab.demo import align_beliefs
    from bayes_infer_ros.model import load_model

    from tolerances import ROS_FLOAT32_ATOL

    config = repo_root / "config" / "agent.yaml"
    sensor_bag = tmp_path / "sensor_bag"
    assert make_bag_main([str(sensor_bag), "--adapters", str(repo_root / ADAPTERS_FILE)]) == 0
    model = load_model(config)
    accuracy, beliefs = {}, {}
    for tag, bag, files in [("categorical", repo_root / "bags" / "agent_sample", [config]),
                            ("sensors", sensor_bag, [config, repo_root / ADAPTERS_FILE])]:
        episode = read_episode(bag)
        stats, samples, log = _replay(bag, files, tmp_path, tag)
        assert stats.wait_timeouts == 0 and len(samples) == episode.num_steps, f"{tag}: {stats.summary()}\n{log}"
        beliefs[tag], got = align_beliefs(samples, episode, model.num_states)
        assert got.all(), tag
        accuracy[tag] = posterior_mode_accuracy(beliefs[tag], episode.states)
    print(f"\naccuracy (location, battery, door): categorical {np.round(accuracy['categorical'], 3).tolist()}, "
          f"sensors {np.round(accuracy['sensors'], 3).tolist()}")
    np.testing.assert_allclose(accuracy["sensors"], accuracy["categorical"], atol=ACCURACY_POINT)
    for f in range(model.num_factors):  # binning recovered every level: the very same beliefs
        np.testing.assert_allclose(beliefs["sensors"][f], beliefs["categorical"][f], rtol=0, atol=ROS_FLOAT32_ATOL)


# ---- every new sensor type replayed, soft evidence as pymdp computes it --------------------------------------
ROBOT = "config/robot.yaml"  # its adapters: optional_messages.robot_adapters (config/robot_adapters.yaml)
ROBOT_STEPS, ROBOT_SEED = 60, 5


def _soft_gripper(sensor_bag, repo_root, episode, modality_index) -> dict:
    """The gripper's soft evidence computed apart from the adapter code: the named joint's position read from each
    JointState, and scipy's normal CDF mass of each interval of the YAML's bins (the outer intervals open)."""
    from rosbags.rosbag2 import Reader
    from scipy.stats import norm

    from bayes_infer_ros.bags import make_typestore

    keys = robot_adapters(repo_root)["gripper_width"]
    inner = keys["bins"][1:-1]
    step_of = {int(ns): t for t, ns in enumerate(episode.stamps_ns)}
    store, out = make_typestore(), {}
    with Reader(sensor_bag) as reader:
        for conn, ns, raw in reader.messages():
            if conn.topic == "/" + keys["topic"]:
                msg = store.deserialize_cdr(raw, conn.msgtype)
                position = float(msg.position[list(msg.name).index(keys["key"])])
                cdf = norm.cdf(inner, loc=position, scale=keys["sigma"])
                out[(step_of[ns], modality_index)] = np.diff(np.concatenate([[0.0], cdf, [1.0]]))
    assert len(out) == episode.num_steps
    return out


def test_every_new_sensor_type_replays_like_its_categorical_episode_and_pymdp(ros_graph, tmp_path, repo_root):
    """Odometry, Imu, JointState (by name, with sigma), Detection2DArray (by class) and a LaserScan with NaN and
    infinite beams, through a node configured only by YAML: its beliefs equal (a) a node's fed the same episode
    as CategoricalObservation, the gripper as the probabilities computed independently (_soft_gripper), and
    (b) pymdp's on the same observations, soft evidence included. Without vision_msgs the detector's modality is
    fed as CategoricalObservation in both (optional_messages)."""
    import dataclasses

    from bayes_infer_ros.bags import read_episode, simulate
    from bayes_infer_ros.bags.bagio import write_episode_bag
    from bayes_infer_ros.bags.make_bag import SAMPLE_DT_S
    from bayes_infer_ros.cli.make_bag import main as make_bag_main
    from bayes_infer_ros.model import load_model
    from lab.demo import align_beliefs
    from lab.golden_pymdp import pymdp_beliefs

    from tolerances import ROS_FLOAT32_ATOL

    model = load_model(repo_root / ROBOT)
    adapters_file = robot_adapters_file(repo_root, tmp_path)
    sensor_bag, categorical_bag = tmp_path / "sensors", tmp_path / "categorical"
    assert make_bag_main([str(sensor_bag), "--model", str(repo_root / ROBOT), "--adapters",
                          str(adapters_file), "--steps", str(ROBOT_STEPS), "--seed", str(ROBOT_SEED)]) == 0
    episode = read_episode(sensor_bag)
    gripper = model.modality_names.index("gripper_width")
    soft = _soft_gripper(sensor_bag, repo_root, episode, gripper)
    rollout = simulate(model, ROBOT_STEPS, ROBOT_SEED)
    write_episode_bag(categorical_bag, model, rollout, dt_s=SAMPLE_DT_S, probabilities=soft,
                      custom_data={"seed": str(ROBOT_SEED), "model_file": ROBOT})
    beliefs = {}
    for tag, bag, files in [("robot_sensors", sensor_bag, [repo_root / ROBOT, adapters_file]),
                            ("robot_categorical", categorical_bag, [repo_root / ROBOT])]:
        stats, samples, log = _replay(bag, files, tmp_path, tag)
        assert stats.wait_timeouts == 0 and len(samples) == episode.num_steps, f"{tag}: {stats.summary()}\n{log}"
        beliefs[tag], got = align_beliefs(samples, episode, model.num_states)
        assert got.all(), tag
    for f in range(model.num_factors):
        np.testing.assert_allclose(beliefs["robot_sensors"][f], beliefs["robot_categorical"][f], rtol=0,
                                   atol=ROS_FLOAT32_ATOL, err_msg=model.factor_name(f))
    truth = read_episode(categorical_bag)
    observations = rollout.observations.copy()
    observations[:, gripper] = -1
    oracle = pymdp_beliefs(model, dataclasses.replace(truth, observations=observations, probabilities=soft), "fpi")
    for f in range(model.num_factors):
        np.testing.assert_allclose(beliefs["robot_sensors"][f], oracle[f], rtol=0, atol=ROS_FLOAT32_ATOL,
                                   err_msg=model.factor_name(f))
    assert min(float(np.max(p)) for p in soft.values()) < 0.9  # the gripper's evidence was soft, not one-hot


# ---- adapters with agents -------------------------------------------------------------------------------------
FLEET_AGENTS = ("a", "b", "c")
FLEET_STEPS = 10


def _robot_params(ros_graph, repo_root, **extra) -> dict:
    """The robot model and its adapters as one node's parameters, event-driven."""
    params = yaml.safe_load((repo_root / ROBOT).read_text())["/**"]["ros__parameters"]
    params["adapters"] = robot_adapters(repo_root)
    params.update({"autostart": True, "rate_hz": 0.0, "algorithm": "fpi", "variant": "baseline",
                   "observation_timeout": 0.0, "jax_compilation_cache_dir": ros_graph["jax_cache"]})
    params.update(extra)
    return params


def _bag_steps(bag) -> list[dict]:
    """Each step's messages of a ``make-bag --adapters`` bag (its sensors, and ``/observations/*`` for a modality
    without an adapter): bag topic -> rclpy message."""
    from rclpy.serialization import deserialize_message
    from rosbags.rosbag2 import Reader

    from bayes_infer_ros.bags import read_custom_data
    from bayes_infer_ros.bags.convert import message_class

    topics = set(read_custom_data(bag)["step_topics"].split(","))
    steps: dict[int, dict] = {}
    with Reader(bag) as reader:
        connections = [c for c in reader.connections if c.topic in topics or c.topic.startswith("/observations/")]
        for conn, ns, raw in reader.messages(connections=connections):
            steps.setdefault(ns, {})[conn.topic] = deserialize_message(bytes(raw), message_class(conn.msgtype))
    return [steps[ns] for ns in sorted(steps)]


def test_a_fleet_node_with_adapters_gives_each_agent_a_single_agent_nodes_beliefs(ros_graph, probe, tmp_path,
                                                                                  repo_root):
    """agents [a, b, c] with the robot's adapters: agent k reads its sensors under ``<k>/`` (``/fleet/a/odom``, ...)
    and its beliefs equal those of a single-agent node fed the same messages."""
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    from bayes_infer_ros.cli.make_bag import main as make_bag_main
    from bayes_infer_ros.msg import Beliefs

    from tolerances import ROS_FLOAT32_ATOL

    episodes = {}
    for seed, agent in enumerate(FLEET_AGENTS, start=11):
        bag = tmp_path / f"bag_{agent}"
        assert make_bag_main([str(bag), "--model", str(repo_root / ROBOT), "--adapters",
                              str(robot_adapters_file(repo_root, tmp_path)), "--steps", str(FLEET_STEPS),
                              "--seed", str(seed)]) == 0
        episodes[agent] = _bag_steps(bag)
    for folder in ("fleet", *(f"single_{a}" for a in FLEET_AGENTS)):
        (tmp_path / folder).mkdir()
    targets = {a: (f"/fleet_sensors/{a}", f"/single_sensors_{a}") for a in FLEET_AGENTS}
    # Each step is published once, on reliable, transient-local publishers and subscriptions
    reliable = {ns: reliable_subscriptions((ns + topic for topic in episodes[a][0]), transient_local=True)
                for a in FLEET_AGENTS for ns in targets[a]}
    fleet_qos = {k: v for a in FLEET_AGENTS for k, v in reliable[targets[a][0]].items()}
    fleet = AgentProcess(tmp_path / "fleet", "agent", _robot_params(
        ros_graph, repo_root, agents=list(FLEET_AGENTS), qos_overrides=fleet_qos), namespace="/fleet_sensors")
    singles = [AgentProcess(tmp_path / f"single_{a}", "agent", _robot_params(
        ros_graph, repo_root, qos_overrides=reliable[targets[a][1]]), namespace=targets[a][1]) for a in FLEET_AGENTS]
    procs = [fleet, *singles]
    try:
        latched = QoSProfile(depth=FLEET_STEPS, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        # latched like the node's beliefs: a recorder that matches a node's writer after its first tick still
        # gets that tick (a volatile one would lose it, and the next step would never be published)
        beliefs = {ns: probe.record(f"{ns}/beliefs", Beliefs, latched) for a in FLEET_AGENTS for ns in targets[a]}
        pubs = {(ns, topic): probe.publisher(ns + topic, type(msg), latched)
                for a in FLEET_AGENTS for ns in targets[a] for topic, msg in episodes[a][0].items()}
        ready = lambda: (all(p.get_subscription_count() >= 1 for p in pubs.values())  # noqa: E731
                         and all(probe.node.count_publishers(f"{ns}/beliefs") >= 1 for ns in beliefs))
        assert wait_for(lambda: ready() or not all(p.alive() for p in procs), 240) and ready(), \
            "\n".join(p.log_tail() for p in procs)
        assert {(i.qos_profile.reliability, i.qos_profile.durability) for ns, topic in pubs
                for i in probe.node.get_subscriptions_info_by_topic(ns + topic)} == {
            (ReliabilityPolicy.RELIABLE, DurabilityPolicy.TRANSIENT_LOCAL)}
        for t in range(FLEET_STEPS):
            for a in FLEET_AGENTS:
                for topic, msg in episodes[a][t].items():
                    for ns in targets[a]:
                        pubs[(ns, topic)].publish(msg)
            assert wait_for(lambda: all(len(b) >= t + 1 for b in beliefs.values()), 90), \
                ({ns: len(b) for ns, b in beliefs.items()}, fleet.log_tail())
        assert not any("ignored" in p.log_text() for p in procs), "\n".join(p.log_tail() for p in procs)
        series = {}
        for a in FLEET_AGENTS:
            got, want = (beliefs[ns] for ns in targets[a])
            assert len(got) == len(want) == FLEET_STEPS, a
            series[a] = [np.concatenate([f.probabilities for f in m.factors]) for _, m in got]
            np.testing.assert_allclose(series[a], [np.concatenate([f.probabilities for f in m.factors])
                                                   for _, m in want], rtol=0, atol=ROS_FLOAT32_ATOL, err_msg=a)
        # the agents' episodes differ, so an agent fed another's sensors would not pass
        assert not np.allclose(series["a"], series["b"]) and not np.allclose(series["b"], series["c"])
    finally:
        for p in procs:
            p.stop()
