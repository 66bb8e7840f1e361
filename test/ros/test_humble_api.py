"""The node on Humble's rclpy API: ``Node.add_post_set_parameters_callback`` (rclpy >= 3.7, Iron) hidden.

The node process deletes the method from rclpy's ``Node`` before the agent module is imported, so every class
the node builds on lacks it, as on Humble. Without the fallback in ``bayes_infer_ros.ros.compat`` the node dies
at construction (AttributeError); with it, every parameter change still takes effect: a ``rate_hz`` change
starts the timer, a refused change builds nothing, ``switch_variant`` answers with the new engine active.
"""
from __future__ import annotations

import sys
import time

import pytest

from ros_harness import AgentProcess, default_params, wait_for

pytestmark = [pytest.mark.ros]

NS = "/humble_api"
NAME = "agent"

HIDE_AND_RUN = """
import sys
import rclpy.node
del rclpy.node.Node.add_post_set_parameters_callback
from rclpy.lifecycle import LifecycleNode
assert not hasattr(LifecycleNode, "add_post_set_parameters_callback")
from bayes_infer_ros.cli.node import main
sys.exit(main(sys.argv))
"""


@pytest.fixture(scope="module")
def agent(ros_graph, tmp_path_factory):
    params = default_params()
    params.update({"jax_compilation_cache_dir": ros_graph["jax_cache"], "variant": "baseline", "autostart": True,
                   "rate_hz": 0.0, "tick_without_observations": True,
                   "observation_timeout": 0.0})
    proc = AgentProcess(tmp_path_factory.mktemp("humble_api"), NAME, params, namespace=NS,
                        executable=[sys.executable, "-c", HIDE_AND_RUN])
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def beliefs(probe, agent):
    from bayes_infer_ros.msg import Beliefs

    return probe.record(f"{NS}/beliefs", Beliefs)


def set_params(probe, **values):
    from rcl_interfaces.srv import SetParameters
    from rclpy.parameter import Parameter

    req = SetParameters.Request()
    req.parameters = [Parameter(k, value=v).to_parameter_msg() for k, v in values.items()]
    return probe.call(SetParameters, f"{NS}/{NAME}/set_parameters", req).results


def test_node_starts_without_post_set_callbacks(agent):
    assert agent.wait_log("no add_post_set_parameters_callback", 60), agent.log_text()
    assert agent.wait_log("active: tick", 120), agent.log_text()
    assert agent.proc.poll() is None, agent.log_text()


def test_parameter_change_takes_effect_through_the_deferred_step(probe, agent, beliefs):
    assert agent.wait_log("active: tick", 120), agent.log_text()
    assert len(beliefs) == 0, "event-driven without observations: no tick expected yet"
    assert all(r.successful for r in set_params(probe, rate_hz=50.0))
    assert wait_for(lambda: len(beliefs) >= 10, 30), f"rate_hz=50 had no effect: {len(beliefs)} ticks"
    assert agent.wait_log("tick: timer at 50 Hz", 5), agent.log_text()


def test_refused_change_is_never_applied(probe, agent):
    (res,) = set_params(probe, algorithm="viterbi")
    assert not res.successful and res.reason
    (res,) = set_params(probe, num_iter=7)
    assert res.successful
    assert wait_for(lambda: "building" in agent.log_text() and "num_iter=7" in agent.log_text(), 30), \
        agent.log_text()
    assert "viterbi" not in "".join(line for line in agent.log_text().splitlines() if "building" in line)


def test_switch_variant_answers_with_the_new_engine_active(probe, agent, beliefs):
    from bayes_infer_ros.srv import SwitchVariant

    req = SwitchVariant.Request()
    req.algorithm, req.variant = "vmp", ""
    res = probe.call(SwitchVariant, f"{NS}/{NAME}/switch_variant", req, timeout=180)
    assert res.success, res.message
    assert res.algorithm == "vmp", res.message
    # fpi beliefs published before the answer can still be queued here; a tick stamped (node clock, this
    # machine's) after the answer arrived began after it, on the engine then active
    answered_ns = time.time_ns()
    stamp = lambda m: m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec  # noqa: E731
    assert wait_for(lambda: any(stamp(m) > answered_ns for _, m in list(beliefs)), 30)
    assert all(m.algorithm == "vmp" for _, m in list(beliefs) if stamp(m) > answered_ns)
