"""One node serving three agents of one model (``agents: [a, b, c]``), over a real ROS graph, against a
single-agent node fed the same labelled, stamped and controlled inputs: each agent's Beliefs equal the single node's
field by field (beliefs, labels, device, variant), their counters match, resetting one agent leaves the others
alone, ``~/reset`` resets them all, a refused input of one agent is counted for that agent only, and an agent named
like its node (whose reset would be the node's own ``~/reset``) is refused at configure."""
from __future__ import annotations

import time

import numpy as np
import pytest

from ros_harness import AgentProcess, default_params, reliable_subscriptions, status_values, wait_for
from tolerances import ROS_FLOAT32_ATOL

pytestmark = pytest.mark.ros

AGENTS = ("a", "b", "c")
MODALITIES = ("rfid_tag", "voltage", "lidar_gap", "charging")
LEVELS = (5, 3, 2, 2)
CONTROLS = 3  # the location factor's controls (the default model: stay, forward, back)


def _params(ros_graph, **extra):
    params = default_params()
    params.update({"jax_compilation_cache_dir": ros_graph["jax_cache"], "variant": "baseline", "rate_hz": 0.0,
                   "autostart": True, "observation_timeout": 60.0, "diagnostics_period": 0.2})
    params.update(extra)
    return params


@pytest.fixture(scope="module")
def nodes(ros_graph, tmp_path_factory):
    # each step is sent once (_step): on reliable subscriptions none is lost
    fleet_inputs = reliable_subscriptions(f"/fleet/{a}/observations/{m}" for a in AGENTS for m in MODALITIES)
    fleet = AgentProcess(tmp_path_factory.mktemp("fleet"), "agent", _params(
        ros_graph, agents=list(AGENTS), qos_overrides=fleet_inputs), namespace="/fleet")
    single = AgentProcess(tmp_path_factory.mktemp("single"), "agent", _params(
        ros_graph, qos_overrides=reliable_subscriptions(f"/single/observations/{m}" for m in MODALITIES)),
        namespace="/single")
    try:
        for p in (fleet, single):
            assert p.wait_log("active: tick", 120), p.log_text()
        yield fleet, single
    finally:
        fleet.stop()
        single.stop()


def _step(probe, ns, beliefs, levels, control=None, controls_counted=None, timeout=60.0):
    """Publish ``control`` (the location factor's, the others 0) and wait until the node counted it
    (``controls_counted()``: its controls counter; a control on another topic may otherwise arrive after the
    observations it precedes), then one observation per modality under ``ns`` (the odd modalities by label, the
    level left 0), once (the node's subscriptions are reliable), and wait for the Beliefs that answer; returns the
    packed beliefs."""
    from bayes_infer_ros.msg import CategoricalObservation, Controls

    pubs = [probe.publisher(f"{ns}/observations/{m}", CategoricalObservation) for m in MODALITIES]
    matched = lambda publishers: all(p.get_subscription_count() >= 1 for p in publishers)  # noqa: E731
    assert wait_for(lambda: matched(pubs), 60), f"{ns}: the node's observation readers are not matched"
    n = len(beliefs)
    if control is not None:
        before = controls_counted()
        msg = Controls()
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(time.time_ns(), 10**9)
        msg.indices = [int(control)] + [0] * (MODEL['factors'] - 1)
        pub = probe.publisher(f"{ns}/controls", Controls, qos=100)
        assert wait_for(lambda: matched([pub]), 60), f"{ns}/controls: the node's reader is not matched"
        pub.publish(msg)
        assert wait_for(lambda: controls_counted() > before, 30.0), f"{ns}/controls: not counted"
    stamp = time.time_ns()
    for i, (pub, level) in enumerate(zip(pubs, levels)):
        msg = CategoricalObservation()
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp, 10**9)
        if i % 2:
            msg.label = LABELS_OF[MODALITIES[i]][level]
        else:
            msg.level = int(level)
        pub.publish(msg)
    assert wait_for(lambda: len(beliefs) > n, timeout), f"{ns}: no beliefs for the step"
    assert len(beliefs) == n + 1, f"{ns}: {len(beliefs) - n} beliefs for one step"
    return np.concatenate([np.asarray(f.probabilities) for f in beliefs[-1][1].factors])


def _fields(msg) -> dict:
    """A Beliefs message's fields that equal inputs must give equal: all but the stamp, the tick and the timing."""
    return {"algorithm": msg.algorithm, "variant": msg.variant, "device": msg.device,
            "factors": [(f.name, list(f.state_labels), f.most_likely_index, f.most_likely_label) for f in msg.factors]}


LABELS_OF: dict[str, list[str]] = {}   # the default model's, filled by the test
MODEL: dict[str, int] = {}


def _reset(probe, service):
    from std_srvs.srv import Trigger

    res = probe.call(Trigger, service, Trigger.Request())
    assert res.success, res.message


def test_three_agents_in_one_node_equal_single_agent_nodes(probe, nodes, repo_root):
    from diagnostic_msgs.msg import DiagnosticArray

    from bayes_infer_ros.model import load_model
    from bayes_infer_ros.msg import Beliefs, CategoricalObservation

    model = load_model(repo_root / "config" / "agent.yaml")
    LABELS_OF.update({model.modality_name(i): [str(x) for x in model.observation_label_list(i)]
                      for i in range(model.num_modalities)})
    MODEL["factors"] = model.num_factors
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
    wait_for(lambda: int(status_values(diags, "/fleet/agent").get("input.c/voltage.rejected", 0)) >= 1, 0.1)
    for _ in range(20):
        msg = CategoricalObservation()
        msg.level = 7
        bad.publish(msg)
        if wait_for(lambda: int(status_values(diags, "/fleet/agent").get("input.c/voltage.rejected", 0)) >= 1, 0.5):
            break
    values = status_values(diags, "/fleet/agent")
    assert int(values["input.c/voltage.rejected"]) >= 1
    assert values["input.a/voltage.rejected"] == "0" and values["input.b/voltage.rejected"] == "0"
    assert any(k.startswith("c/rejected.") for k in values) and not any(k.startswith(("a/rejected.", "b/rejected."))
                                                                        for k in values)

    rng = np.random.default_rng(3)
    steps, reset_b_at = 5, 3
    seqs = {a: [tuple(int(rng.integers(0, m)) for m in LEVELS) for _ in range(steps)] for a in AGENTS}
    controls = {a: [int(rng.integers(0, CONTROLS)) for _ in range(steps)] for a in AGENTS}
    got, got_fields = {a: [] for a in AGENTS}, {a: [] for a in AGENTS}
    for t in range(steps):
        if t == reset_b_at:
            _reset(probe, "/fleet/b/reset")
        for a in AGENTS:  # interleaved: every agent's step t before any agent's step t + 1
            counted = lambda a=a: int(status_values(diags, "/fleet/agent").get(f"{a}/controls", 0))  # noqa: E731
            got[a].append(_step(probe, f"/fleet/{a}", beliefs[a], seqs[a][t], controls[a][t], counted))
            got_fields[a].append(_fields(beliefs[a][-1][1]))
    # the single-agent node, one sequence after another (reset between; b's reset at the same step)
    want, want_fields = {}, {}
    for a in AGENTS:
        _reset(probe, "/single/agent/reset")
        want[a], want_fields[a] = [], []
        for t in range(steps):
            if a == "b" and t == reset_b_at:
                _reset(probe, "/single/agent/reset")
            counted = lambda: int(status_values(diags, "/single/agent").get("controls", 0))  # noqa: E731
            want[a].append(_step(probe, "/single", single_beliefs, seqs[a][t], controls[a][t], counted))
            want_fields[a].append(_fields(single_beliefs[-1][1]))
    for a in AGENTS:
        diff = max(float(np.max(np.abs(g - w))) for g, w in zip(got[a], want[a]))
        assert diff <= ROS_FLOAT32_ATOL, (a, diff)
        assert got_fields[a] == want_fields[a], a
    assert got_fields["a"][0]["device"] == "cpu:0"  # where the tick runs, in both paths
    fleet_values, single_values = status_values(diags, "/fleet/agent"), status_values(diags, "/single/agent")
    assert [int(fleet_values[f"{a}/controls"]) for a in AGENTS] == [steps] * 3
    assert int(single_values["controls"]) == 3 * steps
    assert not any("rejected.bad_control" in k or k.endswith("rejected.unknown_label")
                   for k in list(fleet_values) + list(single_values))
    # b's reset changed b's beliefs (its step after the reset starts from D again), not a's or c's
    assert float(np.max(np.abs(got["b"][reset_b_at] - want["a"][0]))) > 1e-3 or seqs["b"][reset_b_at] == seqs["a"][0]
    assert [m.tick for _, m in beliefs["b"]][-1] == steps  # each agent counts its own steps

    # ~/reset resets every agent: the next step of each starts from D
    _reset(probe, "/fleet/agent/reset")
    for a in AGENTS:
        np.testing.assert_allclose(_step(probe, f"/fleet/{a}", beliefs[a], seqs[a][0]), want[a][0],
                                   atol=ROS_FLOAT32_ATOL)


def test_an_agent_named_like_its_node_is_refused(ros_graph, tmp_path):
    """``agents: [agent, robot2]`` in the node ``agent``: agent ``agent``'s reset would be the node's ``~/reset``
    (one call would reset every agent); configure fails naming both, before any engine is built."""
    proc = AgentProcess(tmp_path, "agent", _params(ros_graph, agents=["agent", "robot2"]), namespace="/clash")
    try:
        assert proc.wait_log("configure failed", 120), proc.log_text()
        log = proc.log_text()
        assert ("agents: the node's ~/reset (every agent) and agent 'agent''s reset would both be the service "
                "/clash/agent/reset") in log, log
        assert "compiled" not in log and "configured in" not in log
    finally:
        proc.stop()


def test_a_node_with_the_most_agents_it_serves_configures_and_ends_on_sigint(ros_graph, tmp_path):
    """A node of MAX_AGENTS agents (a thousand once took over a minute to configure, and SIGINT could not end it):
    it configures, and SIGINT ends it with status 0 (the shutdown is bounded: cli/node.py)."""
    from bayes_infer_ros.node.parameters import MAX_AGENTS

    agents = [f"r{i}" for i in range(MAX_AGENTS)]
    proc = AgentProcess(tmp_path, "agent", _params(ros_graph, agents=agents, variant="fused_numba"), namespace="/many")
    try:
        assert proc.wait_log("active: tick", 300), proc.log_text()[-3000:]
        assert "agents: at most" not in proc.log_text()
    finally:
        status = proc.stop(timeout=60.0)
    assert status == 0, proc.log_text()[-3000:]
