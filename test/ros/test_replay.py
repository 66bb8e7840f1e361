"""Replay the committed sample bag into the agent node (its own process) and check what comes out.

For fpi, vmp and mmp (variant baseline, sim time, lockstep replay so each bag step gives exactly one tick):
- the node's beliefs equal offline inference over the same observations, with the node's semantics
  (bayes_infer_ros.bags.golden), both through our engine and through pymdp 1.0.4;
- the posterior mode matches the true states in the bag at least as often as a floor;
- the recorded beliefs bag (bayes_infer_ros.ros.recorder, rosbags) decodes to what was received;
- fpi also replays the bag twice (--loop): the node resets on the backwards clock, says so, and the second
  pass equals the first.
"""
from __future__ import annotations

import os
import time

import numpy as np
import pytest
import yaml

from tolerances import ACCURACY_TIE_STEPS, REPEAT_ATOL, ROS_FLOAT32_ATOL

# These once ran at ~1 s per step and were parked behind `-m slow`: the cause was rclpy's MultiThreadedExecutor
# starving its own workers (ros2/rclpy#1452), not DDS; the node now uses a SingleThreadedExecutor (see
# bayes_infer_ros/ros/companion.py) and the three replays take about 15 s together.
pytestmark = [pytest.mark.ros]

# Node vs offline (our engine, and pymdp 1.0.4 as the oracle): test/tolerances.ROS_FLOAT32_ATOL, i.e. float32
# inference plus one rounding to the float32 topic. Measured on the sample bag (200 steps, prior chain / windows
# included): fpi 1.8e-7 / 1.8e-7, vmp 6.2e-6 / 4.8e-7, mmp 3.7e-7 / 3.7e-7 (engine / pymdp).
ATOL = ROS_FLOAT32_ATOL
# Posterior-mode accuracy floor per factor: chance (1/n_f) + ACCURACY_MARGIN. Measured on the sample bag with
# the default warehouse model (location/battery/door; chance .25/.33/.5): fpi .985/.895/.66,
# vmp .91/.465/.675, mmp .955/.875/.665. The node's accuracy must also equal the offline one (same argmax
# wherever the beliefs agree to ATOL; ties aside).
ACCURACY_MARGIN = 0.10
# The bag publishes the controls a_t half a period before o_{t+1}, stamped so; at --rate 0 (and under lockstep) they
# leave back to back and reach the node's executor together. The node places controls by stamp, and takes them
# first when both are ready (it subscribes `controls` before the observation topics): no pause needed.
CONTROL_GAP_S = 0.0


@pytest.fixture(scope="module")
def sample(repo_root):
    from bayes_infer_ros.bags import read_episode
    from bayes_infer_ros.model import load_model

    from bayes_infer_ros.bags import model_digest

    params = yaml.safe_load((repo_root / "config" / "agent.yaml").read_text())["/**"]["ros__parameters"]
    bag = repo_root / "bags" / "agent_sample"
    model = load_model(repo_root / "config" / "agent.yaml")
    episode = read_episode(bag)
    if episode.custom_data.get("model_digest") != model_digest(model):
        pytest.fail("bags/agent_sample was made from another model than config/agent.yaml: regenerate it with "
                    "`python -m bayes_infer_ros.cli make-bag --force`")
    return {"bag": bag, "episode": episode, "model": model, "params": params}


def _run_node_and_replay(sample, tmp_path, algorithm: str, loops: int = 1):
    from lab.agent_process import AgentProcess
    from lab.replay_session import ReplaySession

    ns = f"replay_{algorithm}_{os.getpid()}"
    node = AgentProcess(sample["bag"].parents[1] / "config" / "agent.yaml",
                        parameters={"algorithm": algorithm, "variant": "baseline", "use_sim_time": True,
                                    "autostart": True, "rate_hz": 0.0,  # event-driven: one tick per bag step
                                    # lockstep: a step ticks once all its observations are in, never on silence
                                    "observation_timeout": 0.0,
                                    "jax_compilation_cache_dir": str(tmp_path / "jax")},
                        namespace=ns, env=dict(os.environ), log_path=tmp_path / f"agent_{algorithm}.log")
    node.start()
    try:
        with ReplaySession(sample["bag"], namespace=ns, record_to=tmp_path / f"beliefs_{algorithm}",
                           node_name=f"replay_test_{algorithm}") as session:
            deadline = time.monotonic() + 120
            while not session.wait_ready(1.0):
                assert node.alive(), f"agent_node exited:\n{node.log_tail()}"
                assert time.monotonic() < deadline, f"agent_node not ready:\n{node.log_tail()}"
            stats = session.play(rate=0.0, wait_for="beliefs", wait_timeout=10.0, loop=loops > 1, max_loops=loops,
                                 control_gap_s=CONTROL_GAP_S)
            session.drain(stats.steps, timeout=60.0)  # returns as soon as every step is answered
            samples = list(session.beliefs)
            recorded = dict(session.recorder.counts)
        return stats, samples, recorded, node
    finally:
        node.stop()


def _beliefs_by_step(samples, episode, model):
    index = {int(ns): t for t, ns in enumerate(episode.stamps_ns)}
    out = [np.full((episode.num_steps, n), np.nan) for n in model.num_states]
    for s in samples:
        for f, p in enumerate(s.probabilities):
            out[f][index[s.stamp_ns]] = p
    return out


def _golden(sample, algorithm):
    from bayes_infer_ros.bags.golden import engine_beliefs
    from lab.golden_pymdp import pymdp_beliefs

    kw = {"num_iter": int(sample["params"]["num_iter"]), "tau": float(sample["params"]["tau"]),
          "horizon": int(sample["params"]["horizon"])}
    return (engine_beliefs(sample["model"], sample["episode"], algorithm, **kw),
            pymdp_beliefs(sample["model"], sample["episode"], algorithm, **kw))


@pytest.mark.oracle
@pytest.mark.parametrize("algorithm", ["fpi", "vmp", "mmp"])
def test_replay_matches_offline_inference(ros_graph, sample, tmp_path, algorithm):
    from bayes_infer_ros.bags.golden import posterior_mode_accuracy
    from rosbags.rosbag2 import Reader
    from bayes_infer_ros.bags import make_typestore

    episode, model = sample["episode"], sample["model"]
    loops = 2 if algorithm == "fpi" else 1
    stats, samples, recorded, node = _run_node_and_replay(sample, tmp_path, algorithm, loops=loops)
    T = episode.num_steps
    assert stats.wait_timeouts == 0, f"{stats.summary()}\n{node.log_tail()}"
    assert len(samples) == loops * T, f"{len(samples)} beliefs for {loops} x {T} steps\n{node.log_tail()}"
    assert {s.algorithm for s in samples} == {algorithm} and {s.variant for s in samples} == {"baseline"}
    assert [s.stamp_ns for s in samples] == [int(x) for x in episode.stamps_ns] * loops
    assert samples[0].names == [model.factor_name(f) for f in range(model.num_factors)]

    first = _beliefs_by_step(samples[:T], episode, model)
    ours, oracle = _golden(sample, algorithm)
    print(f"\n{algorithm}: max |node - engine| {max(np.abs(a - b).max() for a, b in zip(first, ours)):.2e}, "
          f"max |node - pymdp| {max(np.abs(a - b).max() for a, b in zip(first, oracle)):.2e}")
    for f in range(model.num_factors):
        np.testing.assert_allclose(first[f], ours[f], rtol=0, atol=ATOL,
                                   err_msg=f"{algorithm}: node vs offline engine, factor {f}")
        np.testing.assert_allclose(first[f], oracle[f], rtol=0, atol=ATOL,
                                   err_msg=f"{algorithm}: node vs pymdp 1.0.4, factor {f}")

    acc = posterior_mode_accuracy(first, episode.states)
    offline_acc = posterior_mode_accuracy(ours, episode.states)
    np.testing.assert_allclose(acc, offline_acc, atol=ACCURACY_TIE_STEPS / T)
    for f, name in enumerate(model.factor_names):
        floor = 1.0 / model.num_states[f] + ACCURACY_MARGIN
        assert acc[f] >= floor, f"{algorithm}: accuracy {name} {acc[f]:.3f} < {floor:.3f}"
    print(f"{algorithm}: accuracy {dict(zip(model.factor_names, np.round(acc, 3).tolist()))}; e2e latency "
          f"median {np.median([s.latency_s for s in samples if s.latency_s]) * 1e3:.2f} ms")

    if loops == 2:  # the clock jumped back at the second pass: the node reset to D and said so
        second = _beliefs_by_step(samples[T:], episode, model)
        for f in range(model.num_factors):
            np.testing.assert_allclose(second[f], first[f], rtol=0, atol=REPEAT_ATOL)
        assert "clock jumped backwards" in (node.log_path.read_text(errors="replace"))

    # The recorder's bag decodes (rosbags) to the beliefs received over rclpy.
    assert recorded == {f"/{node.namespace}/beliefs": len(samples)}
    store = make_typestore()
    with Reader(tmp_path / f"beliefs_{algorithm}") as reader:
        decoded = [store.deserialize_cdr(raw, c.msgtype) for c, _, raw in reader.messages()]
    assert len(decoded) == len(samples)
    for msg, s in zip(decoded, samples):
        assert msg.tick == s.tick and msg.algorithm == algorithm
        assert msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec == s.stamp_ns
        for b, p in zip(msg.factors, s.probabilities):
            np.testing.assert_array_equal(b.probabilities, p)


class _Publisher:
    def __init__(self, topic, on_publish):
        self.topic, self._on_publish = topic, on_publish

    def publish(self, msg):
        self._on_publish(self.topic, msg)


class _Node:
    """Stands in for the player's rclpy node: publishers call ``on_publish``; the lockstep subscription's
    callback is kept so the test can answer steps."""

    def __init__(self, on_publish):
        self.on_publish, self.answer = on_publish, None

    def create_publisher(self, _cls, topic, _qos):
        return _Publisher(topic, self.on_publish)

    def create_subscription(self, _cls, _topic, callback, _qos):
        self.answer = callback
        return object()


def test_lockstep_sends_a_step_again_only_until_the_node_first_answers(sample):
    """A node whose reader matched late misses the first step: the player sends it again and goes on in
    lockstep. Once the node has answered, an unanswered step is a timeout, never a second copy (one tick per
    step)."""
    from bayes_infer_ros.ros.replay import BagPlayer, PlaybackOptions

    num_modalities = sample["model"].num_modalities
    seen = []

    def on_publish(topic, msg):
        if "/observations/" not in topic:
            return
        seen.append(topic)
        n = len(seen)
        # the first copy of step 0 is lost; step 5 (the 7th sent) is never answered
        if n > num_modalities and n % num_modalities == 0 and n != 7 * num_modalities:
            node.answer(msg)

    node = _Node(on_publish)
    player = BagPlayer(node, sample["bag"], PlaybackOptions(rate=0.0, clock=False, wait_for="beliefs", wait_timeout=0.2))
    stats = player.run()
    steps = sample["episode"].num_steps
    assert stats.steps == steps and stats.resent_steps == 1 and stats.wait_timeouts == 1, stats.summary()
    assert len(seen) == (steps + 1) * num_modalities
    assert "steps sent again before the first answer: 1" in stats.summary()
