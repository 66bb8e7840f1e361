"""ros/input_diagnostics.py and ros/diagnostic_status.py without a ROS graph: one /diagnostics status per modality and
per control adapter (named ``<node fqn>: <input>``, its ``hardware_id`` the topic it arrives on), WARN while rejecting
or silent; each status built through diagnostic_updater's ``DiagnosticStatusWrapper`` where the distro has it, else
with diagnostic_msgs alone (the fallback, tested here whatever is installed), the same message either way."""
from __future__ import annotations

import importlib.util

import pytest
from diagnostic_msgs.msg import DiagnosticStatus, KeyValue

from bayes_infer_ros.node.admission import ModalityState
from bayes_infer_ros.node.control_feeds import ControlFeed
from bayes_infer_ros.ros import diagnostic_status
from bayes_infer_ros.ros.input_diagnostics import InputSource, control_status, input_statuses

DIAGNOSTIC_UPDATER = importlib.util.find_spec("diagnostic_updater") is not None
NO_DIAGNOSTIC_UPDATER = ("diagnostic_updater is not installed: it is not among the PyPI wheels (requirements/); "
                         "ros-<distro>-diagnostic-updater brings it. The stand-in StatusWrapper runs its path instead")


class StatusWrapper(DiagnosticStatus):
    """diagnostic_updater's ``DiagnosticStatusWrapper`` as its source defines the calls the node makes (ros/diagnostics,
    diagnostic_updater/_diagnostic_status_wrapper.py: a DiagnosticStatus with ``summary(level, message)`` and
    ``add(key, value)``), for the path a distro with diagnostic_updater takes."""

    def summary(self, *args):
        if len(args) == 1:
            self.level, self.message = args[0].level, args[0].message
        else:
            self.level, self.message = args[0], str(args[1])

    def add(self, key, val):
        self.values.append(KeyValue(key=key, value=val))


def test_the_builder_is_named_and_both_paths_give_the_same_status():
    assert diagnostic_status.STATUS_BUILDER == ("diagnostic_updater" if DIAGNOSTIC_UPDATER else "diagnostic_msgs")
    print(f"\n/diagnostics statuses built with {diagnostic_status.STATUS_BUILDER} here")
    values = {"topic": "/robot1/scan", "received": 3}
    fallback = diagnostic_status.make_status("/robot1/agent: lidar", "/robot1/scan", DiagnosticStatus.WARN,
                                             "rejecting input (out_of_bins)", values, wrapper=None)
    wrapped = diagnostic_status.make_status("/robot1/agent: lidar", "/robot1/scan", DiagnosticStatus.WARN,
                                            "rejecting input (out_of_bins)", values, wrapper=StatusWrapper)
    assert type(fallback) is DiagnosticStatus and type(wrapped) is DiagnosticStatus  # published as the message type
    assert wrapped == fallback
    assert (fallback.name, fallback.hardware_id, fallback.level, fallback.message) == (
        "/robot1/agent: lidar", "/robot1/scan", DiagnosticStatus.WARN, "rejecting input (out_of_bins)")
    assert [(kv.key, kv.value) for kv in fallback.values] == [("topic", "/robot1/scan"), ("received", "3")]


@pytest.mark.skipif(not DIAGNOSTIC_UPDATER, reason=NO_DIAGNOSTIC_UPDATER)
def test_the_installed_diagnostic_updater_builds_the_same_status():
    from diagnostic_updater import DiagnosticStatusWrapper

    values = {"topic": "/robot1/scan", "received": 3}
    args = ("/robot1/agent: lidar", "/robot1/scan", DiagnosticStatus.OK, "ok", values)
    assert diagnostic_status.make_status(*args, wrapper=DiagnosticStatusWrapper) == diagnostic_status.make_status(
        *args, wrapper=None)


def _modality(name: str, **state) -> ModalityState:
    mod = ModalityState(name, 2)
    for key, value in state.items():
        setattr(mod, key, value)
    return mod


def test_a_status_per_modality_and_control_named_by_the_node_with_its_topic_as_hardware_id():
    now = 100.0
    mods = [_modality("voltage", received=4, accepted=4, last_heard=99.9, last_accepted=99.9),
            _modality("a/lidar", received=5, accepted=2, rejected={"out_of_bins": 3}, last_rejected=99.5,
                      last_accepted=98.0, last_reason="out_of_bins", last_heard=98.0),
            _modality("rfid", last_heard=10.0)]
    sources = [InputSource("/r/battery_state", "sensor_msgs/msg/BatteryState"),
               InputSource("/r/a/scan", "sensor_msgs/msg/LaserScan"),
               InputSource("/r/observations/rfid", "bayes_infer_ros/msg/CategoricalObservation")]
    feed = ControlFeed("a/controls.motion", "motion", 0, "a/cmd_vel", "geometry_msgs/msg/Twist", ("stop", "drive"))
    feed.received, feed.last_control, feed.accepted, feed.last_accepted = 1, 1, 1, 50.0
    statuses = input_statuses("/r/agent", mods, sources, [None] * 3, [(feed, "/r/a/cmd_vel")], now, 51.0,
                              active=True, timeout_s=1.0)
    named = {s.name: s for s in statuses}
    assert list(named) == ["/r/agent: voltage", "/r/agent: a/lidar", "/r/agent: rfid", "/r/agent: a/controls.motion"]
    assert [s.hardware_id for s in statuses] == ["/r/battery_state", "/r/a/scan", "/r/observations/rfid",
                                                 "/r/a/cmd_vel"]
    levels = {name: s.level for name, s in named.items()}
    assert levels == {"/r/agent: voltage": DiagnosticStatus.OK, "/r/agent: a/lidar": DiagnosticStatus.WARN,
                      "/r/agent: rfid": DiagnosticStatus.WARN, "/r/agent: a/controls.motion": DiagnosticStatus.OK}
    assert named["/r/agent: a/lidar"].message == "rejecting input (out_of_bins)"
    assert named["/r/agent: rfid"].message == "silent: no valid message for more than 1 s"
    values = {kv.key: kv.value for kv in named["/r/agent: a/lidar"].values}
    assert values["type"] == "sensor_msgs/msg/LaserScan" and values["rejected.out_of_bins"] == "3"
    control = {kv.key: kv.value for kv in named["/r/agent: a/controls.motion"].values}
    assert control["control"] == "drive" and named["/r/agent: a/controls.motion"].message == "control drive"
    feed.refuse("out_of_bins", "linear.x = 3 is outside every bin", 52.0)
    refused = control_status("/r/agent", feed, "/r/a/cmd_vel", 52.5)
    assert refused.level == DiagnosticStatus.WARN and refused.message.startswith("rejecting input (out_of_bins)")
    quiet = input_statuses("/r/agent", mods[2:], sources[2:], [None], [], now, 51.0, active=False, timeout_s=1.0)
    assert quiet[0].level == DiagnosticStatus.OK and quiet[0].message == "no message yet"  # inactive: not silent
