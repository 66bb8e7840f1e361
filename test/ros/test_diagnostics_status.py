"""ros/diagnostics.py: the node's /diagnostics status without a ROS graph: sim time without /clock, an
unconfigured, failed or finalized node, and a second node of its name leading the status."""
from __future__ import annotations

import socket

import pytest
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticStatus

from bayes_infer_ros.node import help_text as node_help
from bayes_infer_ros.node.runtime import AgentRuntime
from bayes_infer_ros.node.settings import NodeSettings
from bayes_infer_ros.ros import diagnostics
from recording_log import RecordingLog

S = 1_000_000_000


@pytest.mark.parametrize("use_sim_time,clock_ns,since_start_s,expected", [
    (True, 0, diagnostics.SIM_CLOCK_GRACE_S + 0.1, True),
    (True, 0, diagnostics.SIM_CLOCK_GRACE_S - 0.1, False),   # still within the grace period
    (True, 5 * S, 100.0, False),                              # a /clock message came
    (False, 0, 100.0, False),
])
def test_sim_time_without_clock(use_sim_time, clock_ns, since_start_s, expected):
    assert diagnostics.sim_time_without_clock(use_sim_time, clock_ns, since_start_s) is expected


def _runtime() -> AgentRuntime:
    return AgentRuntime(NodeSettings(), RecordingLog(), lambda: 0, lambda: False, lambda *a: None)


def test_an_unconfigured_node_says_what_it_waits_for_and_a_failed_configure_is_an_error():
    runtime = _runtime()
    kw = dict(clock_ns=0, since_start_s=0.0)
    waiting = diagnostics.node_status("agent", "/ns/agent", runtime, "", **kw)
    assert waiting.level == DiagnosticStatus.WARN and waiting.name == "/ns/agent: inference"
    assert waiting.hardware_id == socket.gethostname() and "ros2 lifecycle set /ns/agent configure" in waiting.message
    failed = diagnostics.node_status("agent", "/ns/agent", runtime, "configure failed: no model", **kw)
    assert failed.level == DiagnosticStatus.ERROR and failed.message == "configure failed: no model"
    runtime.stage = "configuring: loading the model"  # configuring again after a failure: not an error
    again = diagnostics.node_status("agent", "/ns/agent", runtime, "configure failed: no model", **kw)
    assert again.level == DiagnosticStatus.WARN and again.message == "configuring: loading the model"
    arr = diagnostics.diagnostic_array(again, Time(sec=3, nanosec=4))
    assert list(arr.status) == [again] and (arr.header.stamp.sec, arr.header.stamp.nanosec) == (3, 4)


def test_a_finalized_node_says_so_instead_of_waiting_for_configure():
    """After lifecycle shutdown the status says the node is finalized, never that it waits for configure."""
    status = diagnostics.node_status("agent", "/ns/agent", _runtime(), node_help.FINALIZED, clock_ns=0,
                                     since_start_s=0.0)
    assert status.message == node_help.FINALIZED and "ros2 lifecycle set" not in status.message


def test_a_second_node_of_the_same_name_leads_the_status_at_least_as_a_warning():
    line = "2 nodes named /robot/agent run in this ROS graph"
    status = diagnostics.with_duplicate(diagnostics.unconfigured_status("agent", "/robot/agent", "waiting", False),
                                        line)
    assert status.level == DiagnosticStatus.WARN and status.message == f"{line}; waiting"
    failed = diagnostics.with_duplicate(diagnostics.unconfigured_status("agent", "/robot/agent", "no model", True),
                                        line)
    assert failed.level == DiagnosticStatus.ERROR
    ok = DiagnosticStatus(level=DiagnosticStatus.OK, name="/robot/agent: inference", message="ok")
    assert diagnostics.with_duplicate(ok, line).level == DiagnosticStatus.WARN
    assert {v.key: v.value for v in ok.values} == {"duplicate_node_name": line}
    alone = DiagnosticStatus(level=DiagnosticStatus.OK, name="/a: inference", message="ok")
    assert diagnostics.with_duplicate(alone, "").level == DiagnosticStatus.OK and alone.message == "ok"


# ---- surprise: statistics per modality and the warning naming the sensor ---------------------------
def test_surprise_statistics_and_the_warning_name_each_modality_and_its_topic():
    import numpy as np

    from bayes_infer_ros.node.surprise import SurpriseMonitor, SurpriseSettings

    monitor = SurpriseMonitor(["voltage", "lidar_gap"], SurpriseSettings(gates={"voltage": 2.0},
                                                                         thresholds={"lidar_gap": 1.0}, warn_ticks=2))
    for stamp, lidar in ((5_000_000_000, 0.1), (5_100_000_007, 2.3), (5_200_000_000, 2.3)):
        monitor.record(np.array([2.5, lidar]), np.ones(2, bool), stamp_ns=stamp)
    rows = [("voltage", "battery_state", monitor.modality(0)), ("lidar_gap", "scan", monitor.modality(1))]
    values = diagnostics.surprise_values(rows)
    assert values["surprise.voltage.outliers"] == 3 and values["surprise.voltage.gate"] == "2"
    assert values["surprise.lidar_gap.mean"] == f"{(0.1 + 2.3 + 2.3) / 3:.3f}"
    assert values["surprise.lidar_gap.recent_mean"] == "2.300" and values["surprise.lidar_gap.threshold"] == "1"
    assert "surprise.lidar_gap.gate" not in values  # none
    # both warnings hold from the second tick, the first with a mean of the last 2 (voltage 2.5, lidar_gap 1.2)
    assert values["surprise.voltage.warning_since"] == values["surprise.lidar_gap.warning_since"] == "5.100000007"
    warning = diagnostics.surprise_warning(rows, 2)
    assert warning.startswith("surprising input")
    assert "voltage on battery_state: mean 2.50 nats over its last 2 readings > 2" in warning  # warns at its gate
    assert "lidar_gap on scan: mean 2.30 nats over its last 2 readings > 1" in warning
    assert diagnostics.surprise_warning(rows[:0], 2) == ""
