"""examples/perception_node.py: its classifier, and the node started beside the agent (loopback DDS) publishing
labelled observations that the agent accepts."""
from __future__ import annotations

import importlib.util
import sys

import pytest

from ros_harness import REPO_ROOT, AgentProcess, default_params, wait_for

pytestmark = pytest.mark.ros

EXAMPLE = REPO_ROOT / "examples" / "perception_node.py"
NS = "/perceive"


def _example():
    spec = importlib.util.spec_from_file_location("perception_node", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_classifier_maps_thresholds_to_labels(ros_graph):
    example = _example()
    labels = ["low", "medium", "high"]
    got = [example.classify(v, [23.0, 25.0], labels) for v in (20.0, 22.99, 23.0, 24.9, 25.0, 29.0)]
    assert got == ["low", "low", "medium", "medium", "high", "high"]
    with pytest.raises(ValueError):
        example.classify(1.0, [25.0, 23.0], labels)
    volts = [example.simulated_voltage(t, 21.0, 28.0) for t in range(0, 21)]
    assert min(volts) == 21.0 and max(volts) == 28.0  # drains and recharges over 20 s: every label comes up


def test_the_agent_accepts_the_example_nodes_labelled_observations(ros_graph, probe, tmp_path):
    from diagnostic_msgs.msg import DiagnosticArray

    from bayes_infer_ros.msg import Beliefs, CategoricalObservation

    params = default_params()
    params.update({"autostart": True, "variant": "baseline", "diagnostics_period": 0.2,
                   "jax_compilation_cache_dir": ros_graph["jax_cache"]})
    agent = AgentProcess(tmp_path, "agent", params, namespace=NS)
    # A drained battery: 21-22 V is "low", level 2 of the model (level 0, which a publisher that ignored labels
    # would mean, is "high").
    perception = AgentProcess(tmp_path, "perception", {"rate_hz": 20.0, "low_v": 21.0, "high_v": 22.0}, namespace=NS,
                              executable=[sys.executable, str(EXAMPLE)])
    try:
        diags = probe.record("/diagnostics", DiagnosticArray)
        beliefs = probe.record(f"{NS}/beliefs", Beliefs)
        heard = probe.record(f"{NS}/observations/voltage", CategoricalObservation, qos=_sensor_qos())

        def values():
            for _, arr in reversed(list(diags)):
                for st in arr.status:
                    if st.name == f"{NS}/agent: inference":
                        return {kv.key: kv.value for kv in st.values}
            return {}

        accepted = lambda: int(values().get("input.voltage.accepted", 0)) >= 40  # noqa: E731
        assert wait_for(accepted, 180), (values(), agent.log_tail(), perception.log_tail())
        assert perception.alive() and agent.alive()
        assert {m.label for _, m in heard} == {"low"} and {m.level for _, m in heard} == {0}
        now = values()
        assert not any(k.startswith("rejected.") and int(v) > 0 for k, v in now.items()), now
        # the label gave the level (the ticks that show it may come after the 40th reading on a loaded machine)
        low = lambda: bool(beliefs) and beliefs[-1][1].factors[1].most_likely_label == "low"  # noqa: E731
        assert wait_for(low, 60), (len(beliefs), values(), agent.log_tail())
    finally:
        perception.stop()
        agent.stop()


def _sensor_qos():
    from rclpy.qos import qos_profile_sensor_data

    return qos_profile_sensor_data
