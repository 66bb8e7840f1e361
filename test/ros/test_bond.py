"""The bond with Nav2's lifecycle manager (bondpy when importable): the id, topic and heartbeat a
nav2_util::LifecycleNode uses, started on activate and broken on deactivate; nothing without bondpy. With bondpy
importable (a ROS 2 install: ros-<distro>-bondpy), the real bond over DDS against bondpy's manager-side peer; the
PyPI wheels `make setup` installs have no bondpy, and those tests skip there."""
from __future__ import annotations

import importlib.util
import time
from types import SimpleNamespace

import pytest

from bayes_infer_ros.ros import bond
from recording_log import RecordingLog
from ros_harness import AgentProcess, change_state, default_params, wait_for


class FakeBond:
    """bondpy's Bond as the node uses it: (node, topic, id), the heartbeat settings, the formed and broken callbacks
    (bondpy calls them from its threads), start and shutdown."""

    def __init__(self, node, topic, bond_id):
        self.args, self.started, self.stopped = (node, topic, bond_id), False, False
        self.sub, self.pub = "subscription", "publisher"
        self.connect_timeout = 10.0  # bond's Constants.DEFAULT_CONNECT_TIMEOUT
        self.on_formed = self.on_broken = None

    def set_formed_callback(self, callback):
        self.on_formed = callback

    def set_broken_callback(self, callback):
        self.on_broken = callback

    def start(self):
        self.started = True

    def shutdown(self):
        self.stopped = True
        if self.on_broken is not None:  # bondpy's Death() on the node's own break_bond
            self.on_broken()


def fake_node(destroyed=None, ok=True):
    destroyed = [] if destroyed is None else destroyed
    logger = RecordingLog()
    return SimpleNamespace(get_name=lambda: "agent", get_logger=lambda: logger, destroy_subscription=destroyed.append,
                           destroy_publisher=destroyed.append, context=SimpleNamespace(ok=lambda: ok))


def test_bond_forms_with_the_managers_id_and_heartbeat():
    destroyed = []
    node = fake_node(destroyed)
    b = bond.start_bond(node, FakeBond)
    assert b.args == (node, "bond", "agent") and b.started
    assert (b.heartbeat_period, b.heartbeat_timeout) == (0.1, 4.0)
    assert bond.stop_bond(b, node) is None and b.stopped
    assert destroyed == ["subscription", "publisher"]  # off the node too: bondpy's shutdown does not tell it
    assert bond.stop_bond(None, node) is None


def test_the_node_logs_its_bond_as_nav2_util_does():
    """"Creating bond (agent) to lifecycle manager." at activate, then formed; broken when the manager's side goes;
    the node's own break is "Destroying bond", not a broken bond."""
    node = fake_node()
    b = bond.start_bond(node, FakeBond)
    log = node.get_logger().lines
    assert log == [("info", "Creating bond (agent) to lifecycle manager.")]
    b.on_formed()
    assert log[-1] == ("info", "Bond (agent) to lifecycle manager formed.")
    b.on_broken()  # the manager's heartbeat stopped
    assert log[-1][0] == "warning" and log[-1][1].startswith("Bond (agent) to lifecycle manager broken")
    del log[:]
    b = bond.start_bond(node, FakeBond)
    b.on_formed()
    bond.stop_bond(b, node)
    assert log[-1] == ("info", "Destroying bond (agent) to lifecycle manager.")
    assert not [line for line in log if "broken" in line[1]]


def test_no_manager_and_no_bondpy_are_logged_with_the_reason(monkeypatch):
    node = fake_node()
    b = bond.start_bond(node, FakeBond)
    b.on_broken()  # bondpy's connect timeout passed: no manager formed its side
    level, text = node.get_logger().lines[-1]
    assert level == "info" and text.startswith("Bond (agent) to lifecycle manager not formed within 10 s: no "
                                               "lifecycle manager formed its side")
    monkeypatch.setattr(bond, "Bond", None)  # bondpy not importable
    node = fake_node()
    assert bond.start_bond(node) is None
    ((level, text),) = node.get_logger().lines
    assert level == "warning" and "bondpy is not installed" in text and "rosdep install" in text


class DeadContextBond(FakeBond):
    def shutdown(self):
        raise RuntimeError("Failed to publish: publisher's context is invalid")


def test_a_bond_broken_after_the_context_is_gone_does_not_raise():
    """After SIGINT rclpy has shut the context down before destroy_node: the last status cannot be sent (the exit
    status stays 0, the manager sees the heartbeat stop); while the context is up, a failure is raised."""
    destroyed = []
    for ok in (False, True):
        node = fake_node(destroyed, ok)
        b = bond.start_bond(node, DeadContextBond)
        if ok:
            with pytest.raises(RuntimeError, match="context is invalid"):
                bond.stop_bond(b, node)
        else:
            assert bond.stop_bond(b, node) is None


def test_without_bondpy_there_is_no_bond():
    if importlib.util.find_spec("bondpy") is None:
        assert bond.bond_class() is None
        assert bond.start_bond(fake_node()) is None
    else:  # pragma: no cover - a ROS install with bondpy
        assert bond.bond_class() is not None


# ---------------------------------------------------------------------------------------------
# the real bond (bondpy from a ROS 2 install) against a manager-side peer
# ---------------------------------------------------------------------------------------------
NS, NAME = "/bonded", "agent"
FQN = f"{NS}/{NAME}"


@pytest.fixture(scope="module")
def bondpy(ros_graph):
    if importlib.util.find_spec("bondpy") is None:
        pytest.skip("bondpy is not importable (not among the PyPI wheels): on a ROS 2 install, "
                    "`rosdep install` or ros-<distro>-bondpy brings it")
    from bondpy import bondpy as module

    return module


@pytest.fixture(scope="module")
def agent(ros_graph, tmp_path_factory, bondpy):
    tmp = tmp_path_factory.mktemp("bonded")
    params = default_params()
    params.update({"jax_compilation_cache_dir": str(tmp / "jax_cache"), "variant": "baseline", "rate_hz": 20.0,
                   "tick_without_observations": True, "autostart": False, "diagnostics_period": 0.2})
    # a numba cache of its own: a switch to fused_numba compiles its kernels in the node (seconds, not a cache load)
    proc = AgentProcess(tmp, NAME, params, namespace=NS, extra_env={"NUMBA_CACHE_DIR": str(tmp / "numba_cache")})
    yield proc
    proc.stop()


def transition(probe, name: str) -> bool:
    return change_state(probe, FQN, name)


class ManagerBond:
    """The manager's side of the bond, as nav2_lifecycle_manager forms it after activating a node: topic ``bond``
    in the node's namespace, id = the node's name, heartbeat period 0.1 s, timeout 4 s (its bond_timeout)."""

    def __init__(self, bondpy, probe):
        from bond.msg import Status

        self.broken, self.formed, self.heartbeats = [], [], []
        self.bond = bondpy.Bond(probe.node, f"{NS}/bond", NAME, on_broken=lambda: self.broken.append(time.monotonic()),
                                on_formed=lambda: self.formed.append(time.monotonic()))
        self.bond.heartbeat_period, self.bond.heartbeat_timeout = 0.1, 4.0
        # the node's heartbeats, as the manager's bond receives them (another instance id than ours)
        probe.node.create_subscription(Status, f"{NS}/bond", lambda m: self._heard(m), 10)

    def _heard(self, msg) -> None:
        if msg.id == NAME and msg.instance_id != self.bond.instance_id and msg.active:
            self.heartbeats.append(time.monotonic())

    def start(self) -> "ManagerBond":
        self.bond.start()
        return self

    def formed_within(self, seconds: float) -> bool:
        from rclpy.duration import Duration

        return self.bond.wait_until_formed(Duration(seconds=seconds))


def test_the_node_forms_nav2s_bond_with_a_manager_side_peer(probe, agent, bondpy):
    """Nav2's startup: configure, activate, then the manager's bond must form within bond_timeout; it holds with
    the node's heartbeat, and a deactivate breaks it from the node's side (the manager hears it at once)."""
    assert agent.wait_log("unconfigured", 60), agent.log_text()
    assert transition(probe, "configure") and transition(probe, "activate"), agent.log_text()
    manager = ManagerBond(bondpy, probe).start()
    try:
        assert manager.formed_within(10.0), agent.log_text()[-3000:]
        n = len(manager.heartbeats)
        assert wait_for(lambda: len(manager.heartbeats) >= n + 5, 10)  # the node's heartbeat goes on
        assert not manager.bond.is_broken() and not manager.broken
        assert transition(probe, "deactivate"), agent.log_text()
        assert wait_for(lambda: manager.bond.is_broken(), 10), "the node's deactivate must break the bond"
        assert manager.broken
    finally:
        bond.stop_bond(manager.bond, probe.node)
    # activated again: a new bond forms (the manager's reset and startup)
    assert transition(probe, "activate"), agent.log_text()
    again = ManagerBond(bondpy, probe).start()
    try:
        assert again.formed_within(10.0), agent.log_text()[-3000:]
    finally:
        bond.stop_bond(again.bond, probe.node)
    assert agent.alive() and "Traceback" not in agent.log_text(), agent.log_text()[-3000:]


def test_an_engine_swap_that_compiles_keeps_the_bond(probe, agent, bondpy):
    """switch_variant to a variant that compiles in the build thread (fused_numba with an empty numba cache: LLVM
    in the node's process; then back to an XLA variant) while the manager's bond is up: the bond never breaks."""
    from diagnostic_msgs.msg import DiagnosticArray

    from bayes_infer_ros.srv import SwitchVariant

    diags = probe.record("/diagnostics", DiagnosticArray)

    def compiled() -> int:
        for _, arr in reversed(list(diags)):
            for st in arr.status:
                if st.name == f"{FQN}: inference":
                    return int({kv.key: kv.value for kv in st.values}.get("engine_builds_compiled", 0))
        return -1

    # the manager's reset and startup: a bond of the node's is formed with one manager bond only
    assert transition(probe, "deactivate") and transition(probe, "activate"), agent.log_text()
    manager = ManagerBond(bondpy, probe).start()
    try:
        assert manager.formed_within(10.0), agent.log_text()[-3000:]
        assert wait_for(lambda: compiled() >= 0, 10)
        before = compiled()
        for variant in ("fused_numba", "fused_dense"):
            req = SwitchVariant.Request(algorithm="", variant=variant)
            answer = probe.call(SwitchVariant, f"{FQN}/switch_variant", req, timeout=300)
            assert answer.success and answer.variant == variant, answer.message
        assert wait_for(lambda: compiled() >= before + 2, 10), compiled()
        assert not manager.broken and not manager.bond.is_broken(), agent.log_text()[-3000:]
        heard = len(manager.heartbeats)
        assert wait_for(lambda: len(manager.heartbeats) > heard, 5)  # and the heartbeat goes on
    finally:
        bond.stop_bond(manager.bond, probe.node)
