"""node/reporting.py: the node's counters and its warnings, throttled per key, silent once the node closes; an
error logged and counted once per key (a second node of the node's name)."""
from __future__ import annotations

from bayes_infer_ros.node import admission
from bayes_infer_ros.node.reporting import Reporter
from recording_log import RecordingLog


def test_the_reporter_counts_throttles_per_key_and_is_silent_once_closed():
    log, closed = RecordingLog(), [False]
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


def test_an_error_is_logged_and_counted_once_per_key():
    log = RecordingLog()
    reporter = Reporter(log, lambda: False)
    line = "2 nodes named /robot/agent run in this ROS graph"
    assert reporter.error_once("duplicate_node_name", line) == line
    assert reporter.error_once("duplicate_node_name", line) == line
    assert reporter.error_once("other", "") == ""
    assert log.lines == [("error", line)] and reporter.counters == {"duplicate_node_name": 1}
