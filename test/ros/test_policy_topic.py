"""``~/policy`` over a ROS graph: the sample bag replayed into the agent node (its own process) on the default model
with preferences C given in its parameters (config/agent.yaml has none), lockstep on its Beliefs, one tick per bag
step, the observation subscriptions reliable (each step is sent once).

- The bag's controls drive the agent: every step's Policy (stamped as its Beliefs) shows the policies, neg_efe, q_pi
  and the chosen control, and equals pymdp 1.0.4's ``infer_policies`` / ``sample_action`` on the beliefs the node
  published for that step.
- ``policy.publish_controls`` (stochastic, ``policy.seed``), the bag's controls left out: the node runs the closed
  loop on its own; its chosen actions are pymdp's closed loop's on the bag's observations with the same seed, its
  beliefs follow them, and the recorded bag of ``~/policy`` shows them.
- With ``agents``, each agent has its own ``~/<agent>/policy``.
"""
from __future__ import annotations

import os
import time
from typing import Any

import numpy as np
import pytest

from policy_cases import DEFAULT_C
from ros_harness import AgentProcess, default_params, reliable_subscriptions
from tolerances import FLOAT32_ATOL, FLOAT32_RTOL, ROS_FLOAT32_ATOL

pytestmark = [pytest.mark.ros, pytest.mark.oracle]
MODALITIES = ("rfid_tag", "voltage", "lidar_gap", "charging")


@pytest.fixture(scope="module")
def sample(repo_root):
    import dataclasses

    from bayes_infer_ros.bags import read_episode
    from bayes_infer_ros.model import load_model

    model = load_model(repo_root / "config" / "agent.yaml")
    model = dataclasses.replace(model, C=[np.asarray(DEFAULT_C[model.modality_name(i)]) for i in
                                          range(model.num_modalities)]).validate()
    bag = repo_root / "bags" / "agent_sample"
    return {"bag": bag, "episode": read_episode(bag), "model": model}


def _replay(ros_graph, tmp_path, sample, name: str, policy: dict, exclude=()) -> dict:
    """The bag into a node whose model has C and whose ``policy.*`` are ``policy``: the Beliefs and Policy messages
    received, the replay's statistics, the node's log, and the recorded bag of both topics."""
    from lab.replay_session import ReplaySession

    ns = f"{name}_{os.getpid()}"
    params = default_params()
    params["model"]["C"] = dict(DEFAULT_C)
    params["policy"].update(policy)
    params.update({"variant": "baseline", "use_sim_time": True, "autostart": True, "rate_hz": 0.0,
                   "observation_timeout": 0.0,  # lockstep: a step ticks once all its observations are in
                   "jax_compilation_cache_dir": ros_graph["jax_cache"],
                   "qos_overrides": reliable_subscriptions(f"/{ns}/observations/{m}" for m in MODALITIES)})
    node = AgentProcess(tmp_path, "agent", params, namespace=ns)
    try:
        with ReplaySession(sample["bag"], namespace=ns, record_to=tmp_path / f"{name}_bag", node_name=f"player_{name}",
                           policy_topic=f"/{ns}/agent/policy") as session:
            deadline = time.monotonic() + 180
            while not session.wait_ready(1.0):
                assert node.alive(), f"agent_node exited:\n{node.log_tail()}"
                assert time.monotonic() < deadline, f"agent_node not ready:\n{node.log_tail()}"
            stats = session.play(rate=0.0, wait_for="beliefs", wait_timeout=30.0, exclude=tuple(exclude))
            session.drain(stats.steps, timeout=120.0)
            beliefs, policies = list(session.beliefs), list(session.policies)
            late = _late_joiner(session.node, f"/{ns}/agent/policy")
        return {"stats": stats, "beliefs": beliefs, "policies": policies, "log": node.log_text(), "late": late,
                "bag": tmp_path / f"{name}_bag", "topic": f"/{ns}/agent/policy"}
    finally:
        node.stop()


def _late_joiner(node: Any, topic: str, timeout: float = 30.0) -> list:
    """What a subscriber that joins after the replay gets on ``topic`` (transient local, depth 1: the latest)."""
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    from bayes_infer_ros.msg import Policy

    got: list = []
    qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    sub = node.create_subscription(Policy, topic, got.append, qos)
    deadline = time.monotonic() + timeout
    while not got and time.monotonic() < deadline:
        time.sleep(0.05)
    node.destroy_subscription(sub)
    return got


def _check_messages(run: dict, sample: dict, fed_back: bool) -> None:
    """One Policy per bag step, stamped and numbered as that step's Beliefs, with the model's policies and names."""
    from bayes_infer_ros.inference.policy import construct_policies

    episode, model = sample["episode"], sample["model"]
    T, log = episode.num_steps, run["log"][-3000:]
    assert run["stats"].wait_timeouts == 0, f"{run['stats'].summary()}\n{log}"
    assert len(run["beliefs"]) == len(run["policies"]) == T, f"{len(run['beliefs'])}, {len(run['policies'])}\n{log}"
    assert [p.stamp_ns for p in run["policies"]] == [b.stamp_ns for b in run["beliefs"]] == [
        int(x) for x in episode.stamps_ns]
    assert [p.tick for p in run["policies"]] == [b.tick for b in run["beliefs"]]
    controls = model.control_labels
    for p, b in zip(run["policies"], run["beliefs"]):
        assert p.factors == list(model.factor_names) and p.fed_back is fed_back
        assert p.control_labels == [controls[f][u] for f, u in enumerate(p.controls)]
        assert p.inference_ms == b.inference_ms and p.policy_ms > 0
    policies = run["policies"][0].policies
    np.testing.assert_array_equal(policies, construct_policies(model.num_controls, policies.shape[1]))
    [late] = run["late"]  # a subscriber that joins late (ros2 topic echo) gets the latest at once
    assert late.tick == run["policies"][-1].tick and list(late.controls) == list(run["policies"][-1].controls)


def _beliefs(sample: Any) -> list[np.ndarray]:
    """A received Beliefs' factors as pymdp's beliefs of one agent: (1, n_f) float32 each."""
    return [np.asarray(p, np.float32)[None] for p in sample.probabilities]


def test_policy_of_each_replayed_step_equals_pymdp(ros_graph, sample, tmp_path):
    """Two-step policies, gamma 4, deterministic; the bag's controls drive the beliefs."""
    from lab import pymdp_oracle

    run = _replay(ros_graph, tmp_path, sample, "policy", {"len": 2, "gamma": 4.0})
    _check_messages(run, sample, fed_back=False)
    model = sample["model"].with_dtype(np.float32)
    agent = pymdp_oracle.policy_agent(model.A, model.B, model.A_dependencies, model.B_dependencies, model.C,
                                      policy_len=2, gamma=4.0)
    for t, (p, b) in enumerate(zip(run["policies"], run["beliefs"])):
        q_pi, neg_efe = pymdp_oracle.infer_policies(agent, _beliefs(b))
        np.testing.assert_allclose(p.neg_efe, neg_efe[0], rtol=FLOAT32_RTOL, atol=FLOAT32_ATOL, err_msg=f"step {t}")
        np.testing.assert_allclose(p.q_pi, q_pi[0], rtol=0, atol=FLOAT32_ATOL, err_msg=f"step {t}")
        want = int(np.argmax(q_pi[0]))
        # the same policy, or two whose q_pi are equal within rounding (docs/policy.md: "Equal choices assume ...")
        assert p.policy == want or abs(q_pi[0][p.policy] - q_pi[0][want]) <= FLOAT32_ATOL, f"step {t}"
        np.testing.assert_array_equal(p.controls, p.policies[p.policy, 0])
    print(f"\n~/policy: inference_ms median {np.median([p.inference_ms for p in run['policies']]):.3f}, "
          f"policy_ms median {np.median([p.policy_ms for p in run['policies']]):.3f} (9 policies)")
    chosen = {int(p.controls[0]) for p in run["policies"]}
    assert len(chosen) > 1, "a replay worth checking: the chosen move changes with the beliefs"


def test_publish_controls_closes_the_loop_in_a_bag_replay(ros_graph, sample, tmp_path):
    """Stochastic selection from policy.seed, the chosen control fed back, the bag's controls left out: the node's
    actions are pymdp's closed loop's on the bag's observations with the seed's keys, its beliefs follow them, and
    the recorded ~/policy bag holds them."""
    from rosbags.rosbag2 import Reader

    from bayes_infer_ros.bags import make_typestore
    from bayes_infer_ros.bags.golden import observation_distributions
    from bayes_infer_ros.inference.action_noise import ActionNoise
    from lab import pymdp_oracle

    settings = {"selection": "stochastic", "alpha": 4.0, "seed": 7, "publish_controls": True}
    run = _replay(ros_graph, tmp_path, sample, "closed_loop", settings, exclude=["/controls"])
    _check_messages(run, sample, fed_back=True)
    episode = sample["episode"]
    model = sample["model"].with_dtype(np.float32)
    T = episode.num_steps
    obs = observation_distributions(model, episode)
    stream = ActionNoise(7, (model.num_policies,), np.float32)
    keys = []
    for _ in range(T):
        stream.next()
        keys.append(stream.keys())
    agent = pymdp_oracle.policy_agent(model.A, model.B, model.A_dependencies, model.B_dependencies, model.C,
                                      alpha=4.0, action_selection="stochastic")
    theirs = pymdp_oracle.closed_loop(agent, model.A, model.B, model.D, model.A_dependencies, model.B_dependencies,
                                      [[o[t].astype(np.float32) for o in obs] for t in range(T)], 16, keys)
    ours = np.stack([p.controls for p in run["policies"]])
    for t in range(T):
        np.testing.assert_array_equal(ours[t], theirs["action"][t], err_msg=f"step {t}")
        for f, q in enumerate(run["beliefs"][t].probabilities):
            np.testing.assert_allclose(q, theirs["qs"][f][t], rtol=0, atol=ROS_FLOAT32_ATOL, err_msg=f"step {t}")
    assert len({int(a) for a in ours[:, 0]}) == model.num_controls[0], "every move is taken"
    # the bag's own controls are not what the node did
    assert (np.asarray(episode.actions)[:, 0] != ours[:-1, 0]).any()

    store = make_typestore()
    with Reader(run["bag"]) as reader:
        recorded = [store.deserialize_cdr(raw, c.msgtype) for c, _, raw in reader.messages()
                    if c.topic == run["topic"]]
    np.testing.assert_array_equal(np.stack([np.asarray(m.controls) for m in recorded]), ours)
    assert [list(m.control_labels) for m in recorded] == [p.control_labels for p in run["policies"]]


def test_each_agent_has_its_own_policy_topic(ros_graph, probe, tmp_path):
    """With ``agents``, ``~/<agent>/policy`` per agent (private to the node, like ``~/policy``), and none else."""
    from ros_harness import wait_for

    ns = f"policy_agents_{os.getpid()}"
    params = default_params()
    params["model"]["C"] = dict(DEFAULT_C)
    params.update({"agents": ["a", "b"], "autostart": True, "variant": "fused_numba",
                   "jax_compilation_cache_dir": ros_graph["jax_cache"]})
    node = AgentProcess(tmp_path, "agent", params, namespace=ns)
    try:
        assert node.wait_log("active: tick", 180), node.log_tail()
        assert "policy inference: 3 policies of 1 step(s)" in node.log_text()
        topics = [f"/{ns}/agent/{a}/policy" for a in ("a", "b")]
        assert wait_for(lambda: all(probe.node.count_publishers(t) == 1 for t in topics), 30), node.log_tail()
        assert probe.node.count_publishers(f"/{ns}/agent/policy") == 0
    finally:
        node.stop()
