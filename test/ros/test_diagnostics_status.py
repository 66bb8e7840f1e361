"""The parts the node delegates to (no ROS graph): what admission makes the node count and log, silence
warnings, the reporter (counters, throttled warnings), the node's /diagnostics status, and the engine host's
answers that need no engine (``~/switch_variant`` before a build, parameter checks without a model)."""
from __future__ import annotations

import socket

from types import SimpleNamespace

import pytest
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticStatus

from bayes_infer_ros.node import admission
from bayes_infer_ros.ros import diagnostics
from bayes_infer_ros.node.engine_host import EngineHost
from bayes_infer_ros.node.reporting import Reporter
from bayes_infer_ros.node.runtime import AgentRuntime

S = 1_000_000_000


# ---- admission: what the node counts and logs ----------------------------------------------------
def test_a_refused_observation_is_counted_by_reason_and_warned_per_modality_and_reason():
    done = admission.report("camera", admission.Admission(reason="stale", detail="2.000 s old"))
    assert done.counters == ("rejected.stale",)
    assert done.warnings == ((("camera", "stale"), "observations/camera: dropped (stale): 2.000 s old"),)
    assert done.info == ""


def test_an_accepted_observation_counts_its_flags_and_says_when_a_silent_modality_resumes():
    done = admission.report("lidar", admission.Admission(renormalized=True, detail="sum 2 renormalized",
                                                         unstamped=True, superseded=True, resumed=True))
    assert done.counters == ("unstamped", "renormalized", "superseded")
    assert done.warnings == ((("lidar", "renormalized"), "observations/lidar: sum 2 renormalized"),)
    assert done.info == "observations/lidar: receiving again"
    assert admission.report("lidar", admission.Admission()) == admission.AdmissionReport()


def test_arrivals_are_counted_before_admission_and_silence_is_warned_once_per_modality():
    inputs = admission.Inputs(["a", "b"], [2, 3])
    inputs.heard_now(100.0)
    assert inputs.arrived(1, 100.5) is inputs.modalities[1] and inputs.modalities[1].received == 1
    got = inputs.observe(1, 0, [], 0, 0, now=100.5, now_ns=0, arrival=0.0, timeout_s=1.0, max_future_s=0.5)
    assert got.ok
    assert inputs.silence_warnings(101.2, 1.0) == [
        "observations/a: silent (no message yet for more than observation_timeout 1 s); ticks go on without it "
        "(no evidence)"]
    assert inputs.silence_warnings(101.3, 1.0) == []  # reported once
    inputs.arrived(1, 101.4)
    assert inputs.silence_warnings(102.0, 1.0) == [
        "observations/b: silent (no valid message for more than observation_timeout 1 s); ticks go on without "
        "it (no evidence)"]


def _observe(inputs, i, now, timeout_s=1.0):
    assert inputs.observe(i, 0, [], 0, 0, now=now, now_ns=0, arrival=now, timeout_s=timeout_s, max_future_s=0.5).ok


def test_an_event_tick_waits_for_every_modality_again_after_all_inputs_were_quiet():
    inputs = admission.Inputs(["a", "b", "c"], [2, 2, 2])
    inputs.heard_now(100.0)
    _observe(inputs, 0, 105.0)  # every modality silent (a paused bag): a resume, not a step of `a` alone
    assert not inputs.event_ready(105.0, 1.0)
    _observe(inputs, 1, 105.01)
    assert not inputs.event_ready(105.01, 1.0)
    _observe(inputs, 2, 105.02)
    assert inputs.event_ready(105.02, 1.0)
    assert inputs.take()[0].tolist() == [1, 0, 1, 0, 1, 0]
    # a modality that stays quiet is waited for up to observation_timeout after the resume, then left out
    _observe(inputs, 0, 110.0)
    _observe(inputs, 1, 110.0)
    assert not inputs.event_ready(110.9, 1.0) and inputs.event_ready(111.1, 1.0)


def test_a_modality_silent_while_the_others_talk_is_not_waited_for_and_its_late_message_joins_the_next_tick():
    inputs = admission.Inputs(["a", "b"], [2, 2])
    inputs.heard_now(100.0)
    _observe(inputs, 0, 100.5)
    _observe(inputs, 1, 100.5)
    inputs.take()
    _observe(inputs, 0, 101.2)
    assert not inputs.event_ready(101.2, 1.0) and inputs.event_ready(101.6, 1.0)  # b owed until it went silent
    inputs.take()
    _observe(inputs, 0, 101.8)  # `b` silent while `a` talks: `a` alone makes the step
    assert inputs.event_ready(101.8, 1.0)
    assert inputs.take()[0].tolist() == [1, 0, 0, 0]  # b: no evidence (all zero)
    _observe(inputs, 1, 101.81)  # b's message of the same step came a moment later: pending for the next tick
    assert not inputs.event_ready(101.81, 1.0)  # b talks again, and `a` is owed once more
    _observe(inputs, 0, 102.0)
    assert inputs.event_ready(102.0, 1.0) and inputs.take()[0].tolist() == [1, 0, 1, 0]


# ---- the reporter --------------------------------------------------------------------------------
class _Log:
    def __init__(self):
        self.lines: list[tuple[str, str]] = []

    def warning(self, line: str) -> None:
        self.lines.append(("warning", line))

    def info(self, line: str) -> None:
        self.lines.append(("info", line))


def test_the_reporter_counts_throttles_per_key_and_is_silent_once_closed():
    log, closed = _Log(), [False]
    reporter = Reporter(log, lambda: closed[0], period_s=3600.0)
    reporter.count("x")
    reporter.count("x", 2)
    for _ in range(3):
        reporter.warn_throttled("k", "first")
    reporter.warn_throttled("other", "second")
    reporter.warnings([("unknown topic", "unknown_modality_topics"), ("legacy topic", "")])
    reporter.admission(admission.report("m", admission.Admission(resumed=True)))
    assert reporter.counters == {"x": 3, "unknown_modality_topics": 1}
    assert log.lines == [("warning", "first"), ("warning", "second"), ("warning", "unknown topic"),
                         ("warning", "legacy topic"), ("info", "observations/m: receiving again")]
    closed[0] = True
    reporter.warn_throttled("new key", "after close")
    assert log.lines[-1] == ("info", "observations/m: receiving again")


# ---- the node's /diagnostics status --------------------------------------------------------------
@pytest.mark.parametrize("use_sim_time,clock_ns,since_start_s,expected", [
    (True, 0, diagnostics.SIM_CLOCK_GRACE_S + 0.1, True),
    (True, 0, diagnostics.SIM_CLOCK_GRACE_S - 0.1, False),   # still within the grace period
    (True, 5 * S, 100.0, False),                              # a /clock message came
    (False, 0, 100.0, False),
])
def test_sim_time_without_clock(use_sim_time, clock_ns, since_start_s, expected):
    assert diagnostics.sim_time_without_clock(use_sim_time, clock_ns, since_start_s) is expected


def _host(params: dict) -> EngineHost:
    return EngineHost(params.__getitem__, dict, _Log(), lambda *a: None, lambda: False)


def _runtime(params: dict) -> AgentRuntime:
    return AgentRuntime(params.__getitem__, dict, _Log(), lambda: 0, lambda: False, lambda *a: None, lambda: True)


def test_an_unconfigured_node_says_what_it_waits_for_and_a_failed_configure_is_an_error():
    runtime = _runtime({})
    kw = dict(param=lambda n: None, clock_ns=0, since_start_s=0.0)
    waiting = diagnostics.node_status("agent", "/ns/agent", runtime, "", **kw)
    assert waiting.level == DiagnosticStatus.WARN and waiting.name == "/ns/agent: inference"
    assert waiting.hardware_id == socket.gethostname() and "ros2 lifecycle set /ns/agent configure" in waiting.message
    failed = diagnostics.node_status("agent", "/ns/agent", runtime, "configure failed: no model", **kw)
    assert failed.level == DiagnosticStatus.ERROR and failed.message == "configure failed: no model"
    runtime.host.stage = "configuring: loading the model"  # configuring again after a failure: not an error
    again = diagnostics.node_status("agent", "/ns/agent", runtime, "configure failed: no model", **kw)
    assert again.level == DiagnosticStatus.WARN and again.message == "configuring: loading the model"
    arr = diagnostics.diagnostic_array(again, Time(sec=3, nanosec=4))
    assert list(arr.status) == [again] and (arr.header.stamp.sec, arr.header.stamp.nanosec) == (3, 4)


# ---- the engine host without an engine -----------------------------------------------------------
def test_switch_variant_answers_without_waiting_when_there_is_nothing_to_build():
    host = _host({"algorithm": "fpi", "variant": "baseline"})
    calls = []

    def set_parameters(values):
        calls.append(values)
        return False, "refused: no such variant"

    out = host.switch({"algorithm": "", "variant": "x"}, set_parameters, lambda: True, lambda: "not configured")
    assert (out.success, out.message, out.algorithm, out.variant) == (False, "not configured", "fpi", "baseline")
    host.builder = SimpleNamespace(counts={"requested": 0})  # configured: a builder is running
    out = host.switch({"algorithm": "", "variant": ""}, set_parameters, lambda: False, lambda: "not configured")
    assert (out.success, out.message) == (True, "nothing to change") and calls == []
    out = host.switch({"algorithm": "", "variant": "x"}, set_parameters, lambda: False, lambda: "not configured")
    assert (out.success, out.message, out.variant) == (False, "refused: no such variant", "baseline")
    assert calls == [{"variant": "x"}]  # empty fields are not set


def test_parameter_requests_are_checked_together_and_the_first_reason_is_given():
    host = _host({"memory_budget_mb": 1024.0})
    assert host.change_refused([("rate_hz", 50.0), ("num_iter", 16)]) is None
    assert host.change_refused([("rate_hz", 50.0), ("variant", "no_such")]).startswith("variant: 'no_such'")
    assert host.change_refused([("rate_hz", 1e-10), ("variant", "no_such")]).startswith("rate_hz: expected 0")


# ---- surprise: statistics per modality and the warning naming the sensor ---------------------------
def test_surprise_statistics_and_the_warning_name_each_modality_and_its_topic():
    import numpy as np

    from bayes_infer_ros.node.surprise import SurpriseMonitor, SurpriseSettings

    monitor = SurpriseMonitor(["voltage", "lidar_gap"], SurpriseSettings(gates={"voltage": 2.0},
                                                                         thresholds={"lidar_gap": 1.0}, warn_ticks=2))
    for lidar in (0.1, 2.3, 2.3):
        monitor.record(np.array([2.5, lidar]), np.ones(2, bool))
    rows = [("voltage", "battery_state", monitor.modality(0)), ("lidar_gap", "scan", monitor.modality(1))]
    values = diagnostics.surprise_values(rows)
    assert values["surprise.voltage.outliers"] == 3 and values["surprise.voltage.gate"] == "2"
    assert values["surprise.lidar_gap.mean"] == f"{(0.1 + 2.3 + 2.3) / 3:.3f}"
    assert values["surprise.lidar_gap.recent_mean"] == "2.300" and values["surprise.lidar_gap.threshold"] == "1"
    assert "surprise.lidar_gap.gate" not in values  # none
    warning = diagnostics.surprise_warning(rows, 2)
    assert warning.startswith("surprising input")
    assert "voltage on battery_state: mean 2.50 nats over its last 2 readings > 2" in warning  # warns at its gate
    assert "lidar_gap on scan: mean 2.30 nats over its last 2 readings > 1" in warning
    assert diagnostics.surprise_warning(rows[:0], 2) == ""
