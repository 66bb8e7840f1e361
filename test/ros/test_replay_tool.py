"""The replay and record tools over a real graph, without the agent: what is played is what is recorded.

A player (bayes_infer_ros.ros.replay) and a recorder (bayes_infer_ros.ros.recorder) in separate rclpy
contexts, or as the ``bayes-infer replay`` / ``record`` commands in their own processes. Messages are
compared decoded (rosbags), never as bytes.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

pytestmark = pytest.mark.ros


class Context:
    """A private rclpy context with one spinning node."""

    def __init__(self, name: str):
        import rclpy
        from rclpy.context import Context as RclpyContext
        from rclpy.executors import SingleThreadedExecutor

        import bayes_infer_ros.ros  # noqa: F401  (generated interfaces on the path)

        self.rclpy, self.ctx = rclpy, RclpyContext()
        rclpy.init(args=[], context=self.ctx)
        self.node = rclpy.create_node(name, context=self.ctx)
        self.executor = SingleThreadedExecutor(context=self.ctx)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self):
        try:
            self.executor.spin()
        except Exception:  # noqa: BLE001 - shutdown
            pass

    def close(self):
        # the context first (the spin returns), then the spinning thread, then the executor and the node: rclpy's
        # Executor.shutdown destroys the guard conditions a spin in another thread may still be waiting on
        self.rclpy.try_shutdown(context=self.ctx)
        self.thread.join(timeout=5)
        self.executor.shutdown(timeout_sec=2)
        self.node.destroy_node()


@pytest.fixture
def two_contexts(ros_graph):
    a, b = Context("tool_player"), Context("tool_recorder")
    yield a, b
    a.close()
    b.close()


def _decoded(path, store):
    from rosbags.rosbag2 import Reader

    out: dict[str, list] = {}
    with Reader(path) as reader:
        for conn, ns, raw in reader.messages():
            out.setdefault(conn.topic, []).append((ns, store.deserialize_cdr(raw, conn.msgtype)))
    return out


def _wait_until(condition, timeout: float = 60.0) -> bool:
    """Poll ``condition`` until it holds (True) or ``timeout`` s pass (False): a bound for a stuck run, not a
    speed requirement."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _same(a, b) -> bool:
    """Field-wise equality of two rosbags messages (numpy arrays compared by value)."""
    if hasattr(a, "__dataclass_fields__"):
        return all(_same(getattr(a, k), getattr(b, k)) for k in a.__dataclass_fields__)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def test_played_equals_recorded_in_order_and_never_early(two_contexts, repo_root, tmp_path):
    from bayes_infer_ros.bags import make_typestore
    from bayes_infer_ros.ros.recorder import BagRecorder
    from bayes_infer_ros.ros.replay import BagPlayer, PlaybackOptions

    bag = repo_root / "bags" / "agent_sample"
    player_ctx, rec_ctx = two_contexts
    ns = f"tool_{os.getpid()}"
    player = BagPlayer(player_ctx.node, bag, PlaybackOptions(rate=20.0, namespace=ns))
    from rosbags.rosbag2 import Reader

    with Reader(bag) as reader:
        topics = [c.topic if c.topic == "/clock" else f"/{ns}{c.topic}" for c in reader.connections]
    recorder = BagRecorder(rec_ctx.node, tmp_path / "rec")
    assert recorder.wait_and_add(topics, timeout=10.0) == []
    assert player.wait_for_subscribers(60.0, every_topic=True)
    time.sleep(0.3)
    stats = player.run()
    # 19.9 s of bag at 20x: the player waits for each message's scheduled time, so it never finishes early
    # (a load-proof property; how late a loaded machine makes it is not asserted)
    assert stats.wall_s >= 0.9 * 19.9 / 20.0, stats.summary()
    assert stats.steps == 200 and not stats.decode_errors
    expected = sum(len(v) for v in _decoded(bag, make_typestore()).values())
    _wait_until(lambda: sum(recorder.counts.values()) >= expected)
    recorder.close()

    store = make_typestore()
    played, recorded = _decoded(bag, store), _decoded(tmp_path / "rec", store)
    assert {t: len(v) for t, v in recorded.items()} == {
        ("/clock" if t == "/clock" else f"/{ns}{t}"): len(v) for t, v in played.items()}
    for topic, msgs in played.items():
        got = recorded["/clock" if topic == "/clock" else f"/{ns}{topic}"]
        assert all(_same(a[1], b[1]) for a, b in zip(msgs, got)), f"{topic}: decoded messages differ"


def test_loop_synthesised_clock_and_undecodable_records(two_contexts, tmp_path):
    """A bag without /clock gets one per log time; --loop sends sim time backwards once per pass; a corrupt
    record is counted and skipped."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    from bayes_infer_ros.bags import make_typestore
    from bayes_infer_ros.ros.replay import BagPlayer, PlaybackOptions

    store = make_typestore()
    t = store.types
    bag = tmp_path / "noclock"
    with Writer(bag, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        conn = w.add_connection("/observations/x", "bayes_infer_ros/msg/CategoricalObservation", typestore=store)
        for k in range(10):
            ns = 5_000_000_000 + k * 10_000_000
            msg = t["bayes_infer_ros/msg/CategoricalObservation"](
                header=t["std_msgs/msg/Header"](stamp=t["builtin_interfaces/msg/Time"](sec=5, nanosec=k * 10_000_000),
                                                frame_id=""),
                level=k % 3, probabilities=np.zeros(0, np.float32), label="")
            w.write(conn, ns, b"\x00\x01\x00\x00garbage" if k == 4 else
                    bytes(store.serialize_cdr(msg, "bayes_infer_ros/msg/CategoricalObservation")))
    from rosgraph_msgs.msg import Clock

    from bayes_infer_ros.msg import CategoricalObservation

    player_ctx, rec_ctx = two_contexts
    clocks, levels = [], []
    rec_ctx.node.create_subscription(Clock, "/clock", lambda m: clocks.append(m.clock.sec * 10**9 + m.clock.nanosec), 100)
    rec_ctx.node.create_subscription(CategoricalObservation, "/loopns/observations/x", lambda m: levels.append(m.level), 100)
    player = BagPlayer(player_ctx.node, bag, PlaybackOptions(rate=0.0, loop=True, max_loops=2, namespace="loopns",
                                                         jump_pause_s=0.05))
    assert player.wait_for_subscribers(60.0, every_topic=True)
    assert _wait_until(lambda: rec_ctx.node.count_publishers("/loopns/observations/x") > 0
                       and rec_ctx.node.count_publishers("/clock") > 0)
    time.sleep(0.3)
    stats = player.run()
    assert _wait_until(lambda: len(levels) >= 18 and len(clocks) >= 20), (len(levels), len(clocks))
    assert stats.loops == 2 and stats.decode_errors == {"/observations/x": 2}
    assert stats.published == {"/clock": 20, "/observations/x": 18}
    assert levels == [k % 3 for k in range(10) if k != 4] * 2
    assert len(clocks) == 20 and sum(b < a for a, b in zip(clocks, clocks[1:])) == 1
    assert clocks[:10] == [5_000_000_000 + k * 10_000_000 for k in range(10)]

    # --continuous: the second pass is shifted by the bag's span plus one step; time never goes back
    clocks.clear()
    stamps = []
    rec_ctx.node.create_subscription(CategoricalObservation, "/contns/observations/x",
                                     lambda m: stamps.append(m.header.stamp.sec * 10**9 + m.header.stamp.nanosec), 100)
    player = BagPlayer(player_ctx.node, bag, PlaybackOptions(rate=0.0, loop=True, max_loops=2, namespace="contns",
                                                             continuous_loop=True))
    assert player.wait_for_subscribers(60.0, every_topic=True)
    assert _wait_until(lambda: rec_ctx.node.count_publishers("/contns/observations/x") > 0)
    time.sleep(0.3)
    player.run()
    assert _wait_until(lambda: len(stamps) >= 18 and len(clocks) >= 20), (len(stamps), len(clocks))
    assert len(clocks) == 20 and all(b > a for a, b in zip(clocks, clocks[1:]))
    first = [5_000_000_000 + k * 10_000_000 for k in range(10) if k != 4]
    assert stamps == first + [s + 100_000_000 for s in first]


def test_waiting_for_every_topic_covers_topics_that_are_not_observations(two_contexts, repo_root):
    """A recorder subscribes topic by topic: with ``every_topic`` the player also waits for ``true_states``."""
    from std_msgs.msg import Int32MultiArray

    from bayes_infer_ros.bags import read_episode
    from bayes_infer_ros.bags.convert import message_class
    from bayes_infer_ros.ros.replay import BagPlayer, PlaybackOptions

    bag = repo_root / "bags" / "agent_sample"
    first = read_episode(bag).modality_names[0]
    player_ctx, rec_ctx = two_contexts
    ns = f"every_{os.getpid()}"
    player = BagPlayer(player_ctx.node, bag, PlaybackOptions(namespace=ns, clock=False,
                                                         topics=[f"/observations/{first}", "/true_states"]))
    obs_type = message_class("bayes_infer_ros/msg/CategoricalObservation")
    rec_ctx.node.create_subscription(obs_type, f"/{ns}/observations/{first}", lambda _m: None, 10)
    assert player.wait_for_subscribers(60.0)
    assert not player.wait_for_subscribers(1.0, every_topic=True)  # nothing subscribes true_states yet
    rec_ctx.node.create_subscription(Int32MultiArray, f"/{ns}/true_states", lambda _m: None, 10)
    assert player.wait_for_subscribers(60.0, every_topic=True)


def test_replay_and_record_commands(ros_graph, repo_root, tmp_path):
    """`bayes-infer record` and `bayes-infer replay` as processes (their main(argv))."""
    from bayes_infer_ros.bags import make_typestore, read_episode

    env = dict(os.environ)
    out = tmp_path / "cli_rec"
    ns = f"cli_{os.getpid()}"
    ep = read_episode(repo_root / "bags" / "agent_sample")
    first = ep.modality_names[0]
    rec = subprocess.Popen([sys.executable, "-m", "bayes_infer_ros.cli", "record", str(out), "--namespace", ns,
                            "--topics", f"observations/{first}", "true_states", "--count", str(2 * ep.num_steps),
                            "--discovery-timeout", "60"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           cwd=repo_root)
    try:
        play = subprocess.run([sys.executable, "-m", "bayes_infer_ros.cli", "replay", str(repo_root / "bags" / "agent_sample"),
                               "--namespace", ns, "--rate", "40", "--wait-subscribers", "60", "--wait-every-topic", "--no-clock",
                               "--topics", f"/observations/{first}", "/true_states"], env=env, capture_output=True, text=True,
                              timeout=120, cwd=repo_root)
        assert play.returncode == 0, play.stdout + play.stderr
        assert f"published {2 * ep.num_steps} messages" in play.stdout
        try:
            rec_out, _ = rec.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            rec_out, _ = _stop(rec, signal.SIGINT)  # it prints what it recorded, then stops
            pytest.fail(f"the recorder did not stop after {2 * ep.num_steps} messages: {rec_out}")
    finally:
        if rec.poll() is None:
            rec.kill()
    assert rec.returncode == 0, rec_out
    decoded = _decoded(out, make_typestore())
    assert [m.level for _, m in decoded[f"/{ns}/observations/{first}"]] == list(ep.observations[:, 0])
    assert [list(m.data) for _, m in decoded[f"/{ns}/true_states"]] == ep.states.tolist()


def test_replay_command_rejects_a_missing_bag(tmp_path):
    from bayes_infer_ros.cli.replay import main

    assert main([str(tmp_path / "nope")]) == 2


def _stop(rec: subprocess.Popen, sig: signal.Signals, timeout: float = 30.0) -> tuple[bytes, bool]:
    """Send ``sig`` to our own child ``rec``: (its output, True) when it exits within ``timeout``; else it is killed:
    (its output, False)."""
    rec.send_signal(sig)
    try:
        return rec.communicate(timeout=timeout)[0], True
    except subprocess.TimeoutExpired:
        rec.kill()
        return rec.communicate()[0], False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_record_stops_on_a_signal_and_leaves_a_valid_bag(ros_graph, repo_root, tmp_path, sig):
    """`bayes-infer record` with no --count or --duration, stopped as systemd (SIGTERM) or Ctrl-C (SIGINT) stops it:
    it exits 0 and the bag reads back with rosbags, holding what it said it recorded, in order. SIGTERM used to be
    ignored (rclpy's handler shut the context down under a loop that never looked)."""
    from bayes_infer_ros.bags import make_typestore
    from bayes_infer_ros.msg import CategoricalObservation

    out, ns = tmp_path / "signalled", f"sig_{sig.name.lower()}_{os.getpid()}"
    rec = subprocess.Popen([sys.executable, "-m", "bayes_infer_ros.cli", "record", str(out), "--namespace", ns,
                            "--topics", "observations/door", "--discovery-timeout", "60"], env=dict(os.environ),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=repo_root)
    sender = Context("record_sender")
    try:
        pub = sender.node.create_publisher(CategoricalObservation, f"/{ns}/observations/door", 100)
        assert _wait_until(lambda: pub.get_subscription_count() >= 1, timeout=60)
        time.sleep(0.5)  # the recorder's reader matches the writer a moment after the writer sees it
        for level in range(20):
            pub.publish(CategoricalObservation(level=level))
            time.sleep(0.05)
        time.sleep(1.0)
        rec_out, stopped = _stop(rec, sig)
        if not stopped:
            pytest.fail(f"the recorder did not stop on {sig.name}: {rec_out}")
    finally:
        sender.close()
        if rec.poll() is None:
            rec.kill()
    text = rec_out.decode(errors="replace")
    assert rec.returncode == 0, text
    assert f"into {out}" in text and "Traceback" not in text, text
    levels = [m.level for _, m in _decoded(out, make_typestore())[f"/{ns}/observations/door"]]
    assert levels and levels == list(range(levels[0], levels[0] + len(levels))), levels
    assert f"'/{ns}/observations/door': {len(levels)}" in text, text
