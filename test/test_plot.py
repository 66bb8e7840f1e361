"""``bayes-infer plot BAG``: beliefs bags (this version's, with the evidence fields, and one recorded with the
messages before the Belief's most-likely/entropy fields and the Beliefs' evidence fields) -> the demo's figure,
aligned to the episode's steps when the truth is given, with the surprise track when the Beliefs carry it."""
from __future__ import annotations

import numpy as np
import pytest

from bayes_infer_ros.bags import read_episode
from bayes_infer_ros.cli.plot import main as plot_main
from bayes_infer_ros.plot import align_to_steps, read_beliefs
from tolerances import FLOAT32_STORAGE_ATOL

OLD_BELIEF = """std_msgs/Header header
string name
string[] state_labels
float32[] probabilities
"""
BELIEFS = """std_msgs/Header header
uint64 tick
string algorithm
string variant
float32 inference_ms
Belief[] factors
"""


def write_beliefs_bag(path, stamps_ns, probabilities, store, typename="bayes_infer_ros/msg/Beliefs", extra=None,
                      beliefs_extra=None):
    """A beliefs bag as `bayes-infer record` writes it: one Beliefs per stamp, three factors of the default model."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    t = store.types
    names = ["location", "battery", "door"]
    labels = [["dock", "aisle_a", "aisle_b", "charger"], ["high", "medium", "low"], ["open", "closed"]]
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conn = writer.add_connection("/beliefs", typename, typestore=store)
        for k, ns in enumerate(stamps_ns):
            header = t["std_msgs/msg/Header"](stamp=t["builtin_interfaces/msg/Time"](sec=int(ns // 10**9),
                                                                                     nanosec=int(ns % 10**9)), frame_id="")
            factors = [t["bayes_infer_ros/msg/Belief"](header=header, name=n, state_labels=lab,
                                                       probabilities=np.asarray(p[k], np.float32), **(extra or {}))
                       for n, lab, p in zip(names, labels, probabilities)]
            more = beliefs_extra(k) if callable(beliefs_extra) else beliefs_extra or {}
            msg = t[typename](header=header, tick=k + 1, algorithm="fpi", variant="baseline", inference_ms=0.5,
                              factors=factors, **more)
            writer.write(conn, int(ns) + 1000, store.serialize_cdr(msg, typename))


def fake_beliefs(steps, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for n in (4, 3, 2):
        p = rng.random((steps, n)) + 0.01
        out.append(p / p.sum(axis=1, keepdims=True))
    return out


@pytest.mark.heavy
@pytest.mark.parametrize("old", [False, True])
def test_plot_reads_beliefs_bags_and_draws_the_demo_figure(tmp_path, repo_root, capsys, old):
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    from bayes_infer_ros.bags import make_typestore

    sample = repo_root / "bags" / "agent_sample"
    episode = read_episode(sample)
    stamps = episode.stamps_ns[:50]
    probs = fake_beliefs(len(stamps))
    modalities = ["rfid_tag", "voltage", "lidar_gap", "charging"]
    surprise = np.random.default_rng(1).gamma(2.0, 0.5, size=(len(stamps), 4)).astype(np.float32)
    outliers = surprise > 2.0
    if old:  # the message definitions before most_likely_index/most_likely_label/entropy and the evidence
        store = get_typestore(Stores.ROS2_KILTED)
        types = get_types_from_msg(OLD_BELIEF, "bayes_infer_ros/msg/Belief")
        types.update(get_types_from_msg(BELIEFS, "bayes_infer_ros/msg/Beliefs"))
        store.register(types)
        write_beliefs_bag(tmp_path / "beliefs", stamps, probs, store)
    else:
        write_beliefs_bag(tmp_path / "beliefs", stamps, probs, make_typestore(),
                          extra={"most_likely_index": 0, "most_likely_label": "x", "entropy": 0.1},
                          beliefs_extra=lambda k: {"device": "cpu:0", "free_energy": 3.0 + k, "modalities": modalities,
                                                   "surprise": surprise[k], "outliers": outliers[k]})
    series = read_beliefs(tmp_path / "beliefs")
    if old:
        assert series.surprise is None and series.modalities == []
    else:
        assert series.modalities == modalities
        np.testing.assert_allclose(series.surprise, surprise, rtol=0, atol=0)
        np.testing.assert_array_equal(series.outliers, outliers)
        np.testing.assert_allclose(series.free_energy, 3.0 + np.arange(len(stamps)))
    assert series.factor_names == ["location", "battery", "door"] and series.topic == "/beliefs"
    np.testing.assert_array_equal(series.stamps_ns, stamps)
    for got, want in zip(series.probabilities, probs):
        np.testing.assert_allclose(got, want, atol=FLOAT32_STORAGE_ATOL)
    aligned, answered = align_to_steps(series, episode.stamps_ns)
    assert answered.sum() == 50 and not answered[50:].any() and np.isnan(aligned[0][60]).all()
    out = tmp_path / "fig.png"
    assert plot_main([str(tmp_path / "beliefs"), "--truth", str(sample), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert out.stat().st_size > 10_000 and "posterior-mode accuracy" in printed
    assert ("surprise track of rfid_tag, voltage, lidar_gap, charging" in printed) is not old
    assert plot_main([str(tmp_path / "beliefs")]) == 0  # without the truth: beliefs only
    assert (tmp_path / "beliefs" / "beliefs.png").is_file()


def test_plot_refuses_a_bag_without_beliefs(repo_root, capsys, tmp_path):
    assert plot_main([str(repo_root / "bags" / "agent_sample")]) == 1
    assert "no bayes_infer_ros/msg/Beliefs messages" in capsys.readouterr().err
    assert plot_main([str(tmp_path)]) == 2
