"""The optional bond with Nav2's lifecycle manager (bondpy when importable): the id, topic and heartbeat a
nav2_util::LifecycleNode uses, started on activate and broken on deactivate; nothing without bondpy."""
from __future__ import annotations

import importlib.util
from types import SimpleNamespace

from bayes_infer_ros.ros import bond


class FakeBond:
    def __init__(self, node, topic, bond_id):
        self.args, self.started, self.stopped = (node, topic, bond_id), False, False

    def start(self):
        self.started = True

    def shutdown(self):
        self.stopped = True


def test_bond_forms_with_the_managers_id_and_heartbeat():
    node = SimpleNamespace(get_name=lambda: "agent")
    b = bond.start_bond(node, FakeBond)
    assert b.args == (node, "bond", "agent") and b.started
    assert (b.heartbeat_period, b.heartbeat_timeout) == (0.1, 4.0)
    assert bond.stop_bond(b) is None and b.stopped
    assert bond.stop_bond(None) is None


def test_without_bondpy_there_is_no_bond():
    if importlib.util.find_spec("bondpy") is None:
        assert bond.bond_class() is None
        assert bond.start_bond(SimpleNamespace(get_name=lambda: "agent")) is None
    else:  # pragma: no cover - a ROS install with bondpy
        assert bond.bond_class() is not None
