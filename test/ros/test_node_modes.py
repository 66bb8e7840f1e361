"""The launch file's arguments (launch itself is not installable here: it is imported with `launch` and
`launch_ros` stubbed, and the node is started with exactly what LifecycleNode would pass), sim time and
a backwards clock jump, plain-node mode, and models that are refused (missing / malformed)."""
from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from launch_stubs import launch_actions, load_launch_description
from ros_harness import AgentProcess, default_params, publish_until_beliefs, wait_for
from tolerances import ROS_FLOAT32_ATOL

pytestmark = pytest.mark.ros
LAST_CPU = max(os.sched_getaffinity(0))


# ---------------------------------------------------------------------------------------------
# the launch file, evaluated with stub launch / launch_ros modules
# ---------------------------------------------------------------------------------------------
def node_command(launch_args: dict) -> tuple[dict, list[str], list[str]]:
    """What launch_ros would run for these launch arguments: (node kwargs, --ros-args list, params files)."""
    (node,) = [a for a in launch_actions(launch_args) if type(a).__name__ == "LifecycleNode"]
    kw = node.kwargs
    ros_args: list[str] = []
    params_files = []
    for p in kw["parameters"]:
        if isinstance(p, dict):
            for k, v in p.items():
                ros_args += ["-p", f"{k}:={str(v).lower() if isinstance(v, bool) else v}"]
        else:
            params_files.append(p)
    for source, target in kw["remappings"]:
        ros_args += ["-r", f"{source}:={target}"]
    args = list(kw.get("arguments", []))
    assert args[0] == "--ros-args"
    ros_args += args[1:]
    return kw, ros_args, params_files


def test_launch_file_declares_the_standard_arguments():
    entities = load_launch_description()
    declared = {e.args[0]: e.kwargs for e in entities if type(e).__name__ == "DeclareLaunchArgument"}
    assert set(declared) == {"params_file", "adapters_file", "namespace", "use_sim_time", "log_level", "autostart",
                             "use_respawn", "remappings", "use_lifecycle_manager", "lifecycle_params_file"}
    assert all(d.get("description") for d in declared.values())
    default_params_file = Path(declared["params_file"]["default_value"])
    assert default_params_file.name == "agent.yaml" and default_params_file.is_file()
    assert default_params_file.parent.name == "config"  # <share>/bayes_infer_ros/config/agent.yaml, installed
    assert Path(declared["lifecycle_params_file"]["default_value"]).is_file()
    assert declared["use_sim_time"]["default_value"] == "false" and declared["autostart"]["default_value"] == "true"
    assert declared["use_lifecycle_manager"]["default_value"] == "false"
    assert declared["use_respawn"]["default_value"] == "false" and declared["adapters_file"]["default_value"] == ""
    kw, ros_args, params_files = node_command({})
    assert (kw["package"], kw["executable"], kw["name"]) == ("bayes_infer_ros", "agent_node", "agent")
    assert params_files == [str(default_params_file)]
    assert ros_args == ["-p", "use_sim_time:=false", "-p", "autostart:=true", "--log-level", "info"]
    assert kw["respawn"] is False
    from ament_index_python import get_package_share_directory

    assert Path(get_package_share_directory("bayes_infer_ros"), "launch", "agent.launch.py").is_file()


def test_launch_file_with_nav2s_lifecycle_manager():
    """use_lifecycle_manager: the manager in the node's namespace, with the shipped params (bonds on) and
    this node's name; autostart off for the node. Without it and without autostart: the hint names the namespace."""
    actions = launch_actions({"namespace": "/robot1", "use_lifecycle_manager": "true",
                              "remappings": "beliefs:=/fleet/robot1/beliefs, controls:=cmd"})
    node, manager = actions
    assert type(manager).__name__ == "Node" and manager.kwargs["package"] == "nav2_lifecycle_manager"
    assert manager.kwargs["executable"] == "lifecycle_manager" and manager.kwargs["namespace"] == "/robot1"
    mfile, mparams = manager.kwargs["parameters"]
    assert Path(mfile).name == "nav2_lifecycle.yaml"
    manager_params = yaml.safe_load(Path(mfile).read_text())["/**"]["ros__parameters"]  # any namespace
    assert manager_params.get("bond_timeout", 4.0) > 0 and mparams["node_names"] == [node.kwargs["name"]]
    assert mparams["autostart"] is True and node.kwargs["parameters"][1]["autostart"] is False
    assert node.kwargs["namespace"] == "/robot1"
    assert node.kwargs["remappings"] == [("beliefs", "/fleet/robot1/beliefs"), ("controls", "cmd")]
    (hint,) = [a for a in launch_actions({"namespace": "/robot1", "autostart": "false"})
               if type(a).__name__ == "LogInfo"]
    assert "ros2 lifecycle set /robot1/agent configure" in hint.kwargs["msg"]
    assert not [a for a in launch_actions({}) if type(a).__name__ == "LogInfo"]  # autostart: no hint
    with pytest.raises(ValueError, match="remappings"):
        launch_actions({"remappings": "beliefs=/x"})


def test_launch_file_takes_several_params_files_an_adapters_file_and_use_respawn(tmp_path):
    """The documented two-file adapter setup in one launch line, any number of layered params files (later ones
    override earlier ones, as repeated --params-file do), and Nav2's use_respawn."""
    entities = load_launch_description()
    default = {e.args[0]: e.kwargs["default_value"] for e in entities
               if type(e).__name__ == "DeclareLaunchArgument"}["params_file"]
    adapters = Path(default).with_name("agent_adapters.yaml")
    assert adapters.is_file()
    extra = tmp_path / "robot.yaml"
    extra.write_text("/**:\n  ros__parameters:\n    rate_hz: 5.0\n")
    kw, _, files = node_command({"params_file": f"{default}, {extra}", "adapters_file": str(adapters),
                                 "use_respawn": "true"})
    assert files == [default, str(extra), str(adapters)]
    assert kw["respawn"] is True and kw["respawn_delay"] == 2.0
    _, _, files = node_command({"adapters_file": str(adapters)})
    assert files == [default, str(adapters)]
    with pytest.raises(FileNotFoundError, match="adapters_file: .*nope.yaml does not exist"):
        launch_actions({"adapters_file": str(tmp_path / "nope.yaml")})
    with pytest.raises(FileNotFoundError, match="params_file: .*missing.yaml does not exist"):
        launch_actions({"params_file": f"{default},{tmp_path / 'missing.yaml'}"})
    with pytest.raises(ValueError, match="params_file: expected a params file"):
        launch_actions({"params_file": " , "})


# ---------------------------------------------------------------------------------------------
# the node started with the launch file's arguments: lifecycle autostart, namespace, sim time
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def launched(ros_graph, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("launched")
    # the shipped params file plus this run's compilation cache: a second file in the launch's own list, as a user
    # would layer one
    extra = tmp / "cache.yaml"
    extra.write_text(yaml.safe_dump({"/**": {"ros__parameters": {"jax_compilation_cache_dir": ros_graph["jax_cache"]}}}))
    (_, _, (shipped,)) = node_command({})
    kw, ros_args, params_files = node_command({"namespace": "/launched", "use_sim_time": "true", "log_level": "info",
                                               "params_file": f"{shipped},{extra}"})
    assert params_files == [shipped, str(extra)]
    proc = AgentProcess(tmp, kw["name"], namespace=kw["namespace"], params_file=Path(params_files[0]),
                        extra_ros_args=tuple(a for f in params_files[1:] for a in ("--params-file", f))
                        + tuple(ros_args))
    yield proc
    proc.stop()


def _diag(probe, fqn, buf, timeout=5.0):
    n = len(buf)
    wait_for(lambda: len(buf) > n, timeout)
    for _, arr in reversed(buf):
        for st in arr.status:
            if st.name == f"{fqn}: inference":
                return {kv.key: kv.value for kv in st.values} | {"_level": st.level, "_message": st.message}
    return {}


def test_launched_node_autostarts_on_sim_time(probe, launched):
    from diagnostic_msgs.msg import DiagnosticArray
    from lifecycle_msgs.srv import GetState
    from rcl_interfaces.srv import SetParameters
    from rclpy.parameter import Parameter
    from rosgraph_msgs.msg import Clock

    from bayes_infer_ros.msg import Beliefs

    assert launched.wait_log("active: tick", 60), launched.log_text()
    assert probe.call(GetState, "/launched/agent/get_state", GetState.Request(),
                      idempotent=True).current_state.label == "active"
    beliefs = probe.record("/launched/beliefs", Beliefs)
    diags = probe.record("/diagnostics", DiagnosticArray)
    req = SetParameters.Request()
    req.parameters = [Parameter("rate_hz", value=10.0).to_parameter_msg(),
                      Parameter("tick_without_observations", value=True).to_parameter_msg()]
    assert all(r.successful for r in probe.call(SetParameters, "/launched/agent/set_parameters", req).results)
    clock_pub = probe.publisher("/clock", Clock)
    assert wait_for(lambda: clock_pub.get_subscription_count() >= 1, 20)

    def run_clock(start_s: float, seconds: float, step=0.01):
        """Sim time from ``start_s`` for ``seconds``, at the pace of the wall clock (a faster clock lets a loaded
        node's timer skip periods it had no turn for)."""
        t = start_s
        while t < start_s + seconds:
            msg = Clock()
            msg.clock.sec, msg.clock.nanosec = int(t), int(round((t % 1) * 1e9))
            clock_pub.publish(msg)
            t += step
            time.sleep(step)
        return t

    t_end = run_clock(1000.0, 2.0)
    assert wait_for(lambda: len(beliefs) >= 10, 10)
    # the clock has stopped: take the count once the ticks still on their way (a loaded machine) have arrived
    assert wait_for(lambda: time.monotonic() - beliefs[-1][0] >= 1.0, 30)
    n = len(beliefs)
    stamps = [m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for _, m in beliefs]
    assert all(999.9 < s <= t_end + 1e-6 for s in stamps), stamps  # ticks on sim time, stamped with it
    assert 10 <= n <= 25  # 2 s of sim time at 10 Hz
    time.sleep(0.6)
    assert len(beliefs) == n, "ticks must stop when /clock stops"
    # a looping bag: the clock jumps backwards -> reset, said in the log and counted
    run_clock(990.0, 0.5)
    assert launched.wait_log("clock jumped backwards", 10), launched.log_text()
    assert wait_for(lambda: int(_diag(probe, "/launched/agent", diags).get("time_jump_resets", 0)) >= 1, 10)
    m = len(beliefs)
    run_clock(990.5, 1.0)
    assert wait_for(lambda: len(beliefs) >= m + 5, 10), "the node keeps ticking after the jump"


# ---------------------------------------------------------------------------------------------
# plain-node mode and refused models
# ---------------------------------------------------------------------------------------------
def test_plain_mode_and_refused_models(probe, ros_graph, tmp_path):
    from lifecycle_msgs.srv import GetState

    from bayes_infer_ros.msg import Beliefs

    base = default_params()
    base["jax_compilation_cache_dir"] = ros_graph["jax_cache"]
    base["rate_hz"] = 0.0
    malformed = dict(base)
    malformed["model"] = yaml.safe_load(yaml.safe_dump(base["model"]))
    malformed["model"]["A"]["rfid_tag"]["data"] = malformed["model"]["A"]["rfid_tag"]["data"][:-1]
    bad_yaml = tmp_path / "broken.yaml"
    bad_yaml.write_text("/**:\n  ros__parameters:\n    model: [unclosed\n")
    procs = {
        # nonsense startup values: refused with a reason each, the defaults are used, the node runs
        "plain": AgentProcess(tmp_path, "plain_agent", {**base, "num_iter": -5, "device": "tpu", "algorithm": "viterbi",
                                                        "rate_hz": 0, "cpu_affinity": "abc"},
                              namespace="/plain", plain=True),
        "plain_malformed": AgentProcess(tmp_path, "plain_bad", malformed, namespace="/plain_bad", plain=True),
        "missing_file": AgentProcess(tmp_path, "missing", {"model_file": str(tmp_path / "nope.npz"), "autostart": True,
                                                           "cpu_affinity": str(LAST_CPU)}, namespace="/missing"),
        "broken_file": AgentProcess(tmp_path, "broken", {"model_file": str(bad_yaml), "autostart": True},
                                    namespace="/broken"),
    }
    try:
        # a malformed inline model: plain mode exits 1 with a message naming the tensor and the problem
        bad = procs["plain_malformed"]
        assert wait_for(lambda: bad.proc.poll() is not None, 180), bad.log_text()
        assert bad.proc.returncode == 1
        assert "model.A.rfid_tag.data" in bad.log_text() and "has 19 values" in bad.log_text()
        # missing / malformed model files: configure fails with the reason, the lifecycle node stays up, unconfigured
        for key, needle in (("missing_file", "does not exist"), ("broken_file", "not valid YAML")):
            p = procs[key]
            assert p.wait_log("configure failed", 180), p.log_text()
            assert needle in p.log_text() and p.proc.poll() is None
            state = probe.call(GetState, f"{p.namespace}/{p.name}/get_state", GetState.Request(), idempotent=True)
            assert state.current_state.label == "unconfigured"
        # cpu_affinity pins the node's main thread (the executor; the build thread and XLA's pool follow it)
        with open(f"/proc/{procs['missing_file'].pid}/status") as fh:
            allowed = next(line.split()[1] for line in fh if line.startswith("Cpus_allowed_list"))
        assert allowed == str(LAST_CPU), allowed
        # plain mode with the default model: no lifecycle services, beliefs on observations
        plain = procs["plain"]
        assert plain.wait_log("active: tick", 180), plain.log_text()
        log = plain.log_text()
        for line in ("'num_iter' = -5 from the command line / params file refused: num_iter: expected an integer",
                     "'cpu_affinity' = 'abc' from the command line / params file refused: cpu_affinity: expected",
                     "'device' = 'tpu' from the command line / params file refused", "using the default 'fpi'"):
            assert line in log, log
        beliefs = probe.record("/plain/beliefs", Beliefs)
        levels = {"rfid_tag": 2, "voltage": 1, "lidar_gap": 0, "charging": 1}
        assert publish_until_beliefs(probe, "/plain", beliefs, levels, 15), plain.log_text()
        msg = beliefs[0][1]
        assert msg.tick == 1 and all(abs(sum(f.probabilities) - 1) < ROS_FLOAT32_ATOL for f in msg.factors)
        assert int(np.argmax(msg.factors[0].probabilities)) == 2
        names = [n for n, _ in probe.node.get_service_names_and_types()]
        assert "/plain/plain_agent/switch_variant" in names and "/plain/plain_agent/reset" in names
        assert "/plain/plain_agent/get_state" not in names and "/plain/switch_variant" not in names
    finally:
        codes = {k: p.stop() for k, p in procs.items()}
    assert codes["plain"] in (0, -2), codes  # clean exit on SIGINT
