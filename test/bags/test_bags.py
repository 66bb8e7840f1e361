"""Sample bags without ROS: the seeded simulator, the rosbags writer/reader, and the committed sample bag."""
from __future__ import annotations

import numpy as np
import pytest

from bayes_infer_ros.bags import (
    CLOCK_TOPIC, CONTROLS_TOPIC, TRUE_STATES_TOPIC, bag_content_digest, model_digest, read_custom_data,
    read_episode, simulate, write_episode_bag,
)
from bayes_infer_ros.bags.make_bag import SAMPLE_DT_S, SAMPLE_SEED, SAMPLE_STEPS, make_sample_bag
from bayes_infer_ros.cli.make_bag import main as make_bag_main
from bayes_infer_ros.model import GenerativeModel, load_model

from tolerances import FLOAT32_ATOL, GOLDEN_FLOAT32_ATOL, sampling_atol


def tiny_model() -> GenerativeModel:
    """Two factors (one controlled, one with B depending on both), two modalities, one of them on both."""
    A0 = np.array([[0.8, 0.1, 0.1], [0.1, 0.8, 0.2], [0.1, 0.1, 0.7]])
    A1 = np.zeros((2, 3, 2))
    A1[:, :, 0] = [[0.9, 0.6, 0.2], [0.1, 0.4, 0.8]]
    A1[:, :, 1] = [[0.3, 0.5, 0.95], [0.7, 0.5, 0.05]]
    B0 = np.zeros((3, 3, 2))
    B0[:, :, 0] = np.eye(3) * 0.8 + 0.2 / 3 * (1 - np.eye(3)) * 1.5
    B0[:, :, 0] /= B0[:, :, 0].sum(0)
    B0[:, :, 1] = np.roll(np.eye(3), 1, axis=0) * 0.9 + 0.05
    B0[:, :, 1] /= B0[:, :, 1].sum(0)
    B1 = np.zeros((2, 2, 3, 1))
    for s0 in range(3):
        B1[:, :, s0, 0] = [[0.9, 0.2 + 0.2 * s0], [0.1, 0.8 - 0.2 * s0]]
    return GenerativeModel(A=[A0, A1], A_dependencies=[[0], [0, 1]], B=[B0, B1], B_dependencies=[[0], [1, 0]],
                           D=[np.array([0.6, 0.3, 0.1]), np.array([0.5, 0.5])], factor_names=["pos", "mode"],
                           modality_names=["gps", "lamp"]).validate()


def test_simulation_is_a_pure_function_of_the_seed():
    model = tiny_model()
    a, b, c = simulate(model, 60, seed=3), simulate(model, 60, seed=3), simulate(model, 60, seed=4)
    for x, y in ((a.states, b.states), (a.observations, b.observations), (a.actions, b.actions)):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a.observations, c.observations)
    assert a.states.shape == (60, 2) and a.observations.shape == (60, 2) and a.actions.shape == (59, 2)
    assert set(np.unique(a.actions[:, 0])) <= {0, 1} and np.all(a.actions[:, 1] == 0)


def test_simulation_follows_the_generative_process():
    """Empirical p(o | s), p(s' | s, u) and p(s_0) of a long rollout match A, B and D (loose: sampling noise)."""
    model = tiny_model()
    r = simulate(model, 6000, seed=11)
    # A[0]: p(gps | pos)
    for s in range(3):
        at = r.states[:, 0] == s
        freq = np.bincount(r.observations[at, 0], minlength=3) / at.sum()
        np.testing.assert_allclose(freq, model.A[0][:, s], atol=sampling_atol(at.sum()))
    # B[0] under control 1 (the controlled "advance")
    prev, nxt, u = r.states[:-1, 0], r.states[1:, 0], r.actions[:, 0]
    for s in range(3):
        sel = (prev == s) & (u == 1)
        freq = np.bincount(nxt[sel], minlength=3) / sel.sum()
        np.testing.assert_allclose(freq, model.B[0][:, s, 1], atol=sampling_atol(sel.sum()))
    # B[1] depends on (mode, pos): check one slice
    sel = (r.states[:-1, 1] == 1) & (r.states[:-1, 0] == 2)
    freq = np.bincount(r.states[1:, 1][sel], minlength=2) / sel.sum()
    np.testing.assert_allclose(freq, model.B[1][:, 1, 2, 0], atol=sampling_atol(sel.sum()))


def test_bag_round_trip(tmp_path):
    model = tiny_model()
    rollout = simulate(model, 40, seed=5)
    path = write_episode_bag(tmp_path / "ep", model, rollout, dt_s=0.05, start_ns=2_000_000_000)
    ep = read_episode(path)
    np.testing.assert_array_equal(ep.states, rollout.states)
    np.testing.assert_array_equal(ep.observations, rollout.observations)
    np.testing.assert_array_equal(ep.actions, rollout.actions)
    np.testing.assert_array_equal(ep.stamps_ns, 2_000_000_000 + 50_000_000 * np.arange(40))
    assert ep.factor_names == ["pos", "mode"] and ep.modality_names == ["gps", "lamp"]
    assert ep.custom_data["model_digest"] == model_digest(model)


def test_bag_layout_orders_each_step(tmp_path):
    """clock, then observations, then true states at t_k; the controls a_k at t_k + dt/2 (and stamped so), before
    o_{k+1}."""
    from rosbags.rosbag2 import Reader

    model = tiny_model()
    path = write_episode_bag(tmp_path / "ep", model, simulate(model, 5, seed=1), dt_s=0.1, start_ns=10**9)
    with Reader(path) as reader:
        seq = [(c.topic, ns) for c, ns, _ in reader.messages()]
        types = {c.topic: c.msgtype for c in reader.connections}
    step = [CLOCK_TOPIC, "/observations/gps", "/observations/lamp", TRUE_STATES_TOPIC]
    expected = []
    for k in range(5):
        expected += [(t, 10**9 + k * 10**8) for t in step]
        if k < 4:
            expected.append((CONTROLS_TOPIC, 10**9 + k * 10**8 + 5 * 10**7))
    assert seq == expected
    assert types == {CLOCK_TOPIC: "rosgraph_msgs/msg/Clock", CONTROLS_TOPIC: "bayes_infer_ros/msg/Controls",
                     TRUE_STATES_TOPIC: "std_msgs/msg/Int32MultiArray",
                     "/observations/gps": "bayes_infer_ros/msg/CategoricalObservation",
                     "/observations/lamp": "bayes_infer_ros/msg/CategoricalObservation"}


def test_controls_are_stamped_and_labelled(tmp_path):
    """Each Controls message carries its log time as header.stamp, one index per factor and, when the model names
    its controls, the matching labels."""
    from rosbags.rosbag2 import Reader

    from bayes_infer_ros.bags import make_typestore

    model = tiny_model()
    model.control_labels = [["hold", "advance"], ["none"]]
    rollout = simulate(model, 6, seed=2)
    path = write_episode_bag(tmp_path / "ep", model, rollout, dt_s=0.1, start_ns=10**9)
    store = make_typestore()
    with Reader(path) as reader:
        conns = [c for c in reader.connections if c.topic == CONTROLS_TOPIC]
        msgs = [(ns, store.deserialize_cdr(raw, c.msgtype)) for c, ns, raw in reader.messages(connections=conns)]
    assert len(msgs) == 5
    for k, (ns, msg) in enumerate(msgs):
        assert msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec == ns
        assert list(msg.indices) == list(rollout.actions[k])
        assert list(msg.labels) == [model.control_labels[f][int(u)] for f, u in enumerate(rollout.actions[k])]


def test_legacy_actions_bags_are_still_read(tmp_path):
    """A bag made before the Controls message (unstamped std_msgs/Int32MultiArray on /actions) reads the same."""
    from rosbags.rosbag2 import Reader, StoragePlugin, Writer

    from bayes_infer_ros.bags import make_typestore

    model = tiny_model()
    rollout = simulate(model, 6, seed=4)
    new = write_episode_bag(tmp_path / "new", model, rollout, dt_s=0.1, start_ns=10**9)
    store = make_typestore()
    int_array = "std_msgs/msg/Int32MultiArray"
    with Reader(new) as reader, Writer(tmp_path / "old", version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        for key, value in read_custom_data(new).items():
            writer.set_custom_data(key, value)
        conns = {}
        for c in reader.connections:
            topic, msgtype = ("/actions", int_array) if c.topic == CONTROLS_TOPIC else (c.topic, c.msgtype)
            conns[c.id] = writer.add_connection(topic, msgtype, typestore=store)
        for c, ns, raw in reader.messages():
            if c.topic == CONTROLS_TOPIC:
                indices = store.deserialize_cdr(raw, c.msgtype).indices
                t = store.types
                layout = t["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
                raw = store.serialize_cdr(t[int_array](layout=layout, data=np.asarray(indices, np.int32)), int_array)
            writer.write(conns[c.id], ns, raw)
    old, fresh = read_episode(tmp_path / "old"), read_episode(new)
    np.testing.assert_array_equal(old.actions, fresh.actions)
    np.testing.assert_array_equal(old.actions, rollout.actions)


# ---- the committed sample bag -------------------------------------------------------------------
@pytest.fixture(scope="module")
def sample_bag(repo_root):
    path = repo_root / "bags" / "agent_sample"
    if not (path / "metadata.yaml").is_file():
        pytest.fail(f"{path} missing: run `python -m bayes_infer_ros.cli make-bag --force` and commit bags/")
    return path


def test_sample_bag_is_small_and_made_from_the_default_model(sample_bag, repo_root):
    size = sum(p.stat().st_size for p in sample_bag.iterdir())
    assert size < 256 * 1024, f"sample bag is {size} bytes"
    meta = read_custom_data(sample_bag)
    model = load_model(repo_root / "config" / "agent.yaml")
    assert meta["model_digest"] == model_digest(model), (
        "bags/agent_sample was made from another model than config/agent.yaml: "
        "regenerate it with `python -m bayes_infer_ros.cli make-bag --force`")
    assert (meta["seed"], meta["num_steps"]) == (str(SAMPLE_SEED), str(SAMPLE_STEPS))
    ep = read_episode(sample_bag)
    assert ep.num_steps == SAMPLE_STEPS and np.all(ep.states >= 0) and np.all(ep.actions >= 0)
    assert ep.modality_names == [model.modality_name(i) for i in range(model.num_modalities)]


def test_sample_bag_regenerates_bit_for_bit(sample_bag, repo_root, tmp_path):
    out = make_sample_bag(tmp_path / sample_bag.name, repo_root / "config" / "agent.yaml",
                          SAMPLE_STEPS, SAMPLE_SEED, SAMPLE_DT_S)
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in sample_bag.iterdir())
    for p in sample_bag.iterdir():
        assert (out / p.name).read_bytes() == p.read_bytes(), f"{p.name} differs from a fresh regeneration"
    assert bag_content_digest(out) == bag_content_digest(sample_bag)


def test_make_bag_cli_refuses_to_clobber(tmp_path, repo_root, capsys):
    target = tmp_path / "b"
    target.mkdir()
    (target / "notes.txt").write_text("not a bag")
    assert make_bag_main([str(target), "--steps", "5"]) == 2
    assert make_bag_main([str(target), "--steps", "5", "--force"]) == 2  # no metadata.yaml: not a bag
    assert (target / "notes.txt").exists()
    fresh = tmp_path / "c"
    assert make_bag_main([str(fresh), "--steps", "5", "--seed", "1"]) == 0
    assert make_bag_main([str(fresh), "--steps", "6", "--force"]) == 0
    assert read_episode(fresh).num_steps == 6
    assert make_bag_main([str(tmp_path / "d"), "--model", str(tmp_path / "missing.yaml")]) == 1
    assert "missing.yaml" in capsys.readouterr().err


@pytest.mark.heavy
def test_offline_golden_engine_matches_pymdp(tmp_path):
    """The two offline implementations the replay tests compare the node with agree (short episode)."""
    from bayes_infer_ros.bags.golden import engine_beliefs, posterior_mode_accuracy
    from lab.golden_pymdp import pymdp_beliefs

    model = tiny_model()
    path = write_episode_bag(tmp_path / "ep", model, simulate(model, 8, seed=2))
    ep = read_episode(path)
    for algorithm in ("fpi", "mmp"):
        ours = engine_beliefs(model, ep, algorithm, num_iter=8, horizon=3)
        oracle = pymdp_beliefs(model, ep, algorithm, num_iter=8, horizon=3)
        for a, b in zip(ours, oracle):
            np.testing.assert_allclose(a, b, rtol=0, atol=GOLDEN_FLOAT32_ATOL)
            np.testing.assert_allclose(a.sum(axis=1), 1.0, atol=FLOAT32_ATOL)
    # pymdp's padded fixed window (valid_steps) equals its truncated windows: the padding trick is exact
    truncated = pymdp_beliefs(model, ep, "mmp", num_iter=8, horizon=3, padded=False)
    for a, b in zip(truncated, oracle):
        np.testing.assert_allclose(a, b, rtol=0, atol=GOLDEN_FLOAT32_ATOL)
    acc = posterior_mode_accuracy(ours, ep.states)
    assert acc.shape == (2,) and np.all((0 <= acc) & (acc <= 1))
