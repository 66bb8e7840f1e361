"""The node's interface as a robot team meets it, over a real ROS graph (node processes started as `ros2 run`
would): private, remappable services next to the lifecycle services; stamped controls placed on their window
step even when they arrive late; beliefs kept for late joiners (transient local, depth 1) with the most likely
state and the entropy; qos_overrides honoured or refused with a reason; `--help`; read-only parameters that say
how to set them; a warning for the old `actions` topic.
"""
from __future__ import annotations

import os
import subprocess
import time

import numpy as np
import pytest

from ros_harness import AgentProcess, agent_executable, default_params, status_values, wait_for
from test_node_graph import make_controls, max_diff, now_ns, obs_sequence, oracle_window, publish_observations
from tolerances import ROS_FLOAT32_ATOL

pytestmark = [pytest.mark.ros]

NS = "/iface"
NAME = "agent_a"
MODALITIES = ("rfid_tag", "voltage", "lidar_gap", "charging")


@pytest.fixture(scope="module")
def model():
    from bayes_infer_ros.model import load_model
    from ros_harness import REPO_ROOT

    return load_model(REPO_ROOT / "config" / "agent.yaml")


def _params(ros_graph, **extra) -> dict:
    params = default_params()
    params.update({"jax_compilation_cache_dir": ros_graph["jax_cache"], "observation_timeout": 30.0,
                   "variant": "baseline", "autostart": True, "rate_hz": 0.0})
    params.update(extra)
    return params


@pytest.fixture(scope="module")
def agent(ros_graph, tmp_path_factory):
    """A lifecycle node (autostart) in a namespace, its private reset remapped by a ~ rule and its
    switch_variant by a fully qualified rule."""
    params = _params(ros_graph, algorithm="mmp", horizon=4, diagnostics_period=0.2)
    proc = AgentProcess(tmp_path_factory.mktemp("iface"), NAME, params,
                        namespace=NS, extra_ros_args=("-r", "~/reset:=~/restart", "-r",
                                                      f"{NS}/{NAME}/switch_variant:={NS}/switch"))
    assert proc.wait_log("active: tick", 120), proc.log_text()
    yield proc
    proc.stop()


def _wait_ready(probe, ns):
    from bayes_infer_ros.msg import CategoricalObservation, Controls

    for name in MODALITIES:
        assert probe.wait_subscribers(f"{ns}/observations/{name}", CategoricalObservation, 1)
    assert probe.wait_subscribers(f"{ns}/controls", Controls, 1)
    time.sleep(0.5)  # best-effort readers match a moment after we see them


def _controls_counted(diags) -> int:
    """The node's `controls` counter in its newest /diagnostics status (-1 before one arrived)."""
    values = status_values(diags, f"{NS}/{NAME}")
    return int(values.get("controls", 0)) if values else -1


def test_services_are_private_remappable_and_next_to_the_lifecycle_services(probe, agent):
    from bayes_infer_ros.srv import SwitchVariant
    from std_srvs.srv import Trigger

    def names():
        return {n for n, _ in probe.node.get_service_names_and_types()}

    assert wait_for(lambda: {f"{NS}/{NAME}/restart", f"{NS}/switch", f"{NS}/{NAME}/get_state"} <= names(), 20), names()
    assert f"{NS}/reset" not in names() and f"{NS}/switch_variant" not in names()   # nothing in the namespace root
    assert f"{NS}/{NAME}/reset" not in names()                                      # the remap replaced it
    assert probe.call(Trigger, f"{NS}/{NAME}/restart", Trigger.Request()).success
    res = probe.call(SwitchVariant, f"{NS}/switch", SwitchVariant.Request(), timeout=60)
    assert res.success and res.algorithm == "mmp", res.message


def test_late_controls_land_on_their_step_in_the_window(probe, agent, model):
    """MMP, horizon 4. Each step's controls (stamped between that step and the next) are published only after the
    next step's observations: tick t cannot know the controls into t yet and holds the previous ones; from tick
    t+1 on, the window has them on the right transition. Each tick equals pymdp with exactly that knowledge."""
    from bayes_infer_ros.msg import Beliefs, Controls
    from diagnostic_msgs.msg import DiagnosticArray
    from std_srvs.srv import Trigger

    beliefs = probe.record(f"{NS}/beliefs", Beliefs)
    diags = probe.record("/diagnostics", DiagnosticArray)
    _wait_ready(probe, NS)

    def answered(timeout) -> bool:
        n = len(beliefs)
        publish_observations(probe, NS, {m: 0 for m in MODALITIES}, now_ns())
        return wait_for(lambda: len(beliefs) > n, timeout)

    # best effort: the node's readers match our writers a moment after we see them, so steps are sent until one
    # is answered; the restart then clears it (nothing pending)
    assert any(answered(1.0) for _ in range(30)), agent.log_text()[-2000:]
    assert probe.call(Trigger, f"{NS}/{NAME}/restart", Trigger.Request()).success
    horizon, steps = 4, 7
    seq = obs_sequence(model, steps, seed=31)
    rng = np.random.default_rng(32)
    actions = [np.zeros(model.num_factors, np.int32)] + [
        np.array([rng.integers(0, u) for u in model.num_controls], np.int32) for _ in range(steps - 1)]
    actions[2] = np.array([2, 0, 0], np.int32)  # differs from its neighbours: a misplaced control would show
    actions[3] = np.array([1, 0, 0], np.int32)
    base = now_ns()
    stamps = [base + 50_000_000 * t for t in range(steps)]
    pub = probe.publisher(f"{NS}/controls", Controls)
    got = []
    for t in range(steps):
        n = len(beliefs)
        publish_observations(probe, NS, seq[t], stamps[t])
        assert wait_for(lambda: len(beliefs) > n, 20), agent.log_text()[-2000:]
        got.append(beliefs[-1][1])
        if t >= 1:         # now that tick t is done, the controls into step t (stamped in [t-1, t)) arrive late
            labels = [model.control_labels[f][int(u)] for f, u in enumerate(actions[t])]
            # the next step's observations travel on other topics: sent once the node counted the controls
            assert wait_for(lambda: _controls_counted(diags) >= 0, 10), "no /diagnostics from the node"
            counted = _controls_counted(diags)
            pub.publish(make_controls(actions[t], stamp=stamps[t - 1] + 10_000_000, labels=labels))
            assert wait_for(lambda: _controls_counted(diags) > counted, 30), "the node did not count the controls"
    for t in range(steps):
        known = [a.copy() for a in actions]
        if t >= 1:  # into step t: not yet received -> the newest earlier controls hold
            known[t] = actions[t - 1] if t >= 2 else np.zeros(model.num_factors, np.int32)
        want = oracle_window(model, "mmp", seq[:t + 1], known[:t + 1], horizon)[-1]
        assert max_diff([got[t]], [want]) <= ROS_FLOAT32_ATOL, t
    # the stamp of each Beliefs is its step's: every control was placed by stamp, not by arrival
    assert [m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec for m in got] == stamps


def test_late_joiner_gets_the_latest_beliefs(probe, agent, model):
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    from bayes_infer_ros.msg import Belief, Beliefs

    _wait_ready(probe, NS)
    stamp = now_ns()
    seen = probe.record(f"{NS}/beliefs", Beliefs)
    publish_observations(probe, NS, {m: 0 for m in MODALITIES}, stamp)
    assert wait_for(lambda: any(m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec == stamp
                                for _, m in seen), 20)
    info = probe.node.get_publishers_info_by_topic(f"{NS}/beliefs")
    assert [i.qos_profile.durability for i in info] == [DurabilityPolicy.TRANSIENT_LOCAL]
    late = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    joined, joined_factor = [], []  # own buffers (probe.record shares one list per topic)
    probe.node.create_subscription(Beliefs, f"{NS}/beliefs", joined.append, late)
    probe.node.create_subscription(Belief, f"{NS}/beliefs/location", joined_factor.append, late)
    assert wait_for(lambda: joined and joined_factor, 10), "a late transient-local subscriber got nothing"
    time.sleep(0.5)
    assert len(joined) == 1 and len(joined_factor) == 1  # depth 1: only the latest, no new tick needed
    msg = joined[0]
    assert msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec == stamp
    loc = joined_factor[0]
    assert loc.most_likely_label == "dock" and loc.most_likely_index == int(np.argmax(loc.probabilities))
    assert 0.0 <= loc.entropy <= np.log(4) + ROS_FLOAT32_ATOL


def test_help_prints_usage_and_exits():
    from bayes_infer_ros.node.parameters import PARAMETERS

    out = subprocess.run(agent_executable() + ["--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: agent_node")
    for spec in PARAMETERS:
        assert f"  {spec.name} " in out.stdout, spec.name
    for needle in ("~/reset", "~/switch_variant", "controls", "transient local", "qos_overrides", "a/reset"):
        assert needle in out.stdout, needle
    assert "rclpy" not in out.stderr  # no node was started


def test_read_only_parameters_say_how_to_set_them(probe, agent):
    from rcl_interfaces.srv import DescribeParameters, SetParameters
    from rclpy.parameter import Parameter

    req = DescribeParameters.Request(names=["device", "observation_qos_depth"])
    desc = probe.call(DescribeParameters, f"{NS}/{NAME}/describe_parameters", req, idempotent=True).descriptors
    for d in desc:
        assert d.read_only and f"--ros-args -p {d.name}:=VALUE` and restart the node" in d.additional_constraints
    req = SetParameters.Request(parameters=[Parameter("algorithm", value="vmp").to_parameter_msg(),
                                            Parameter("horizon", value=0).to_parameter_msg()])
    res = probe.call(SetParameters, f"{NS}/{NAME}/set_parameters", req).results
    assert not res[1].successful and res[1].reason


def test_old_actions_topic_is_named_with_its_replacement(probe, agent):
    from std_msgs.msg import Int32MultiArray

    pub = probe.publisher(f"{NS}/actions", Int32MultiArray)
    pub.publish(Int32MultiArray(data=[1, 0, 0]))
    assert agent.wait_log(f"{NS}/actions has a publisher, but this node no longer reads it", 10), agent.log_text()[-2000:]
    assert f"bayes_infer_ros/msg/Controls (stamped) on {NS}/controls" in agent.log_text()


def test_qos_overrides_are_honoured_or_refused_with_a_reason(probe, ros_graph, tmp_path):
    from rclpy.qos import DurabilityPolicy

    ok = _params(ros_graph, qos_overrides={
        "/qos_ok/beliefs": {"publisher": {"durability": "volatile", "depth": 5}},
        "/qos_ok/beliefs/door": {"publisher": {"durability": "volatile"}},
        "/elsewhere/beliefs": {"publisher": {"durability": "volatile"}},
    })
    bad = _params(ros_graph, qos_overrides={"/qos_bad/beliefs": {"publisher": {"durability": "forever"}}})
    procs = [AgentProcess(tmp_path, "qos_ok", ok, namespace="/qos_ok"),
             AgentProcess(tmp_path, "qos_bad", bad, namespace="/qos_bad")]
    try:
        good, broken = procs
        assert good.wait_log("active: tick", 120), good.log_text()
        durability = lambda topic: [i.qos_profile.durability for i in probe.node.get_publishers_info_by_topic(topic)]  # noqa: E731
        want = {"/qos_ok/beliefs": [DurabilityPolicy.VOLATILE], "/qos_ok/beliefs/door": [DurabilityPolicy.VOLATILE],
                "/qos_ok/beliefs/location": [DurabilityPolicy.TRANSIENT_LOCAL]}  # location: not overridden
        assert wait_for(lambda: all(durability(t) == d for t, d in want.items()), 10), \
            {t: durability(t) for t in want}
        assert ("parameter 'qos_overrides./elsewhere/beliefs.publisher.durability' ignored: this node has no "
                "publisher /elsewhere/beliefs") in good.log_text()
        assert broken.wait_log("configure failed", 120), broken.log_text()
        assert "durability" in broken.log_text() and "forever" in broken.log_text()
        assert broken.proc.poll() is None  # the lifecycle node stays up, unconfigured
    finally:
        for p in procs:
            p.stop()


def test_bayes_infer_is_on_path_in_the_colcon_install():
    import shutil
    from pathlib import Path

    from ament_index_python import get_package_prefix

    installed = Path(get_package_prefix("bayes_infer_ros")) / "bin" / "bayes-infer"
    assert installed.exists(), "CMakeLists.txt installs scripts/bayes-infer into <prefix>/bin"
    # install/setup.bash puts <prefix>/bin on PATH (the venv's copy from `make setup` may come first)
    assert str(installed.parent) in os.environ["PATH"].split(os.pathsep) and shutil.which("bayes-infer")
    out = subprocess.run([str(installed), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "model" in out.stdout and "plot" in out.stdout
