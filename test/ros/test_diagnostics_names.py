"""/diagnostics from agents in two namespaces: each status is named by its node's fully qualified name (the
aggregator keeps them apart), carries the host as hardware_id, and the shipped analyzer configuration groups
them (config/diagnostics_analyzers.yaml, installed)."""
from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
import yaml

from ros_harness import REPO_ROOT, AgentProcess, wait_for

pytestmark = pytest.mark.ros


def generic_analyzer_matches(spec: dict, name: str) -> bool:
    """diagnostic_aggregator's GenericAnalyzer match rules (any of startswith / contains / name / regex; a regex
    matches the whole name: generic_analyzer.cpp's std::regex_match)."""
    return (any(name.startswith(s) for s in spec.get("startswith", []))
            or any(s in name for s in spec.get("contains", []))
            or name in spec.get("name", []) or any(re.fullmatch(r, name) for r in spec.get("regex", [])))


def test_two_namespaces_publish_two_statuses(probe, ros_graph, tmp_path):
    from diagnostic_msgs.msg import DiagnosticArray

    diags = probe.record("/diagnostics", DiagnosticArray)
    # unconfigured nodes publish their status too (what they wait for): no model needs loading here
    procs = [AgentProcess(tmp_path, "agent", {"diagnostics_period": 0.2}, namespace=ns) for ns in ("/robot1", "/robot2")]
    try:
        expected = {"/robot1/agent: inference", "/robot2/agent: inference"}

        def seen():
            return {st.name: st for _, arr in list(diags) for st in arr.status}

        assert wait_for(lambda: expected <= set(seen()), 60), [p.log_text() for p in procs]
        statuses = seen()
        for name in expected:
            assert statuses[name].hardware_id == socket.gethostname()
            assert f"ros2 lifecycle set {name.split(':')[0]} configure" in statuses[name].message
        analyzers = yaml.safe_load((REPO_ROOT / "config" / "diagnostics_analyzers.yaml").read_text())
        spec = analyzers["analyzers"]["ros__parameters"]["bayes_infer_ros"]
        assert spec["type"] == "diagnostic_aggregator/GenericAnalyzer"
        assert all(generic_analyzer_matches(spec, n) for n in expected)
        assert not generic_analyzer_matches(spec, "/robot1/motor_driver: temperature")
        inputs = analyzers["analyzers"]["ros__parameters"]["bayes_infer_ros_inputs"]  # the per-input statuses
        assert all(generic_analyzer_matches(inputs, n) for n in ("/robot1/agent: lidar_gap", "/agent: voltage",
                                                                  "/robot1/agent: controls.motion",
                                                                  "/robot1/agent: a/rfid_tag"))
        assert not any(generic_analyzer_matches(inputs, n) for n in (*expected, "/robot1/motor_driver: temperature"))
    finally:
        for p in procs:
            p.stop()
    from ament_index_python import get_package_share_directory

    share = Path(get_package_share_directory("bayes_infer_ros"), "config")
    assert (share / "diagnostics_analyzers.yaml").is_file() and (share / "nav2_lifecycle.yaml").is_file()
