"""One node serving three agents of one model (``agents: [a, b, c]``), over a real ROS graph, against a
single-agent node fed the same inputs: each agent's beliefs equal the single node's, resetting one agent leaves the
others alone, ``~/reset`` resets them all, and a refused input of one agent is counted for that agent only."""
from __future__ import annotations

import time

import numpy as np
import pytest

from ros_harness import AgentProcess, default_params, wait_for
from tolerances import ROS_FLOAT32_ATOL

pytestmark = pytest.mark.ros

AGENTS = ("a", "b", "c")
MODALITIES = ("rfid_tag", "voltage", "lidar_gap", "charging")
LEVELS = (5, 3, 2, 2)


def _params(ros_graph, **extra):
    params = default_params()
    params.update({"jax_compilation_cache_dir": ros_graph["jax_cache"], "variant": "baseline", "rate_hz": 0.0,
                   "autostart": True, "observation_timeout": 60.0, "diagnostics_period": 0.2})
    params.update(extra)
    return params


@pytest.fixture(scope="module")
def nodes(ros_graph, tmp_path_factory):
    fleet = AgentProcess(tmp_path_factory.mktemp("fleet"), "agent", _params(ros_graph, agents=list(AGENTS)),
                         namespace="/fleet")
    single = AgentProcess(tmp_path_factory.mktemp("single"), "agent", _params(ros_graph), namespace="/single")
    try:
        for p in (fleet, single):
            assert p.wait_log("active: tick", 120), p.log_text()
        yield fleet, single
    finally:
        fleet.stop()
        single.stop()


def _step(probe, ns, beliefs, levels, timeout=20.0):
    """Publish one observation per modality under ``ns`` until a new Beliefs message answers; returns it."""
    from bayes_infer_ros.msg import CategoricalObservation

    pubs = [probe.publisher(f"{ns}/observations/{m}", CategoricalObservation) for m in MODALITIES]
    n = len(beliefs)
    end = time.monotonic() + timeout
    while len(beliefs) == n and time.monotonic() < end:
        stamp = time.time_ns()
        for pub, level in zip(pubs, levels):
            msg = CategoricalObservation()
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp, 10**9)
            msg.level = int(level)
            pub.publish(msg)
        wait_for(lambda: len(beliefs) > n, 2.0)
    assert len(beliefs) == n + 1, f"{ns}: {len(beliefs) - n} beliefs for one step"
    return np.concatenate([np.asarray(f.probabilities) for f in beliefs[-1][1].factors])


def _reset(probe, service):
    from std_srvs.srv import Trigger

    res = probe.call(Trigger, service, Trigger.Request())
    assert res.success, res.message


def _diag(diags, fqn):
    for _, arr in reversed(diags):
        for st in arr.status:
            if st.name == f"{fqn}: inference":
                return {kv.key: kv.value for kv in st.values}
    return {}


def test_three_agents_in_one_node_equal_single_agent_nodes(probe, nodes):
    from diagnostic_msgs.msg import DiagnosticArray

    from bayes_infer_ros.msg import Beliefs, CategoricalObservation

    fleet, single = nodes
    beliefs = {a: probe.record(f"/fleet/{a}/beliefs", Beliefs) for a in AGENTS}
    single_beliefs = probe.record("/single/beliefs", Beliefs)
    diags = probe.record("/diagnostics", DiagnosticArray)
    for ns in [f"/fleet/{a}" for a in AGENTS] + ["/single"]:
        for m in MODALITIES:
            assert probe.wait_subscribers(f"{ns}/observations/{m}", CategoricalObservation, 1)
    time.sleep(0.5)
    names = [n for n, _ in probe.node.get_service_names_and_types()]
    assert all(f"/fleet/{a}/reset" in names for a in AGENTS) and "/fleet/agent/reset" in names

    # a refused input of agent c (a level out of range): counted for c alone
    bad = probe.publisher("/fleet/c/observations/voltage", CategoricalObservation)
    wait_for(lambda: int(_diag(diags, "/fleet/agent").get("input.c/voltage.rejected", 0)) >= 1, 0.1)
    for _ in range(20):
        msg = CategoricalObservation()
        msg.level = 7
        bad.publish(msg)
        if wait_for(lambda: int(_diag(diags, "/fleet/agent").get("input.c/voltage.rejected", 0)) >= 1, 0.5):
            break
    values = _diag(diags, "/fleet/agent")
    assert int(values["input.c/voltage.rejected"]) >= 1
    assert values["input.a/voltage.rejected"] == "0" and values["input.b/voltage.rejected"] == "0"
    assert any(k.startswith("c/rejected.") for k in values) and not any(k.startswith(("a/rejected.", "b/rejected."))
                                                                        for k in values)

    rng = np.random.default_rng(3)
    steps, reset_b_at = 5, 3
    seqs = {a: [tuple(int(rng.integers(0, m)) for m in LEVELS) for _ in range(steps)] for a in AGENTS}
    got = {a: [] for a in AGENTS}
    for t in range(steps):
        if t == reset_b_at:
            _reset(probe, "/fleet/b/reset")
        for a in AGENTS:  # interleaved: every agent's step t before any agent's step t + 1
            got[a].append(_step(probe, f"/fleet/{a}", beliefs[a], seqs[a][t]))
    # the single-agent node, one sequence after another (reset between; b's reset at the same step)
    want = {}
    for a in AGENTS:
        _reset(probe, "/single/agent/reset")
        want[a] = []
        for t in range(steps):
            if a == "b" and t == reset_b_at:
                _reset(probe, "/single/agent/reset")
            want[a].append(_step(probe, "/single", single_beliefs, seqs[a][t]))
    for a in AGENTS:
        diff = max(float(np.max(np.abs(g - w))) for g, w in zip(got[a], want[a]))
        assert diff <= ROS_FLOAT32_ATOL, (a, diff)
    # b's reset changed b's beliefs (its step after the reset starts from D again), not a's or c's
    assert float(np.max(np.abs(got["b"][reset_b_at] - want["a"][0]))) > 1e-3 or seqs["b"][reset_b_at] == seqs["a"][0]
    assert [m.tick for _, m in beliefs["b"]][-1] == steps  # each agent counts its own steps

    # ~/reset resets every agent: the next step of each starts from D
    _reset(probe, "/fleet/agent/reset")
    for a in AGENTS:
        np.testing.assert_allclose(_step(probe, f"/fleet/{a}", beliefs[a], seqs[a][0]), want[a][0],
                                   atol=ROS_FLOAT32_ATOL)
