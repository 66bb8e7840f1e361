"""``bayes-infer replay BAG``: publish a rosbag2 bag into a running ROS 2 graph, in log-time order.

``ros2 bag play`` (rosbag2_py) is not on PyPI; this player reads the bag with ``rosbags`` (pure Python) and
publishes with rclpy using the colcon-generated message classes (the raw CDR from the bag is turned into a
generated-class message by rclpy's own deserialiser, so anything that does not decode is counted and skipped,
never published).

- ``/clock`` (rosgraph_msgs/Clock) drives sim time: published as recorded when the bag has it, else one Clock
  per distinct log time is synthesised just before that time's messages (``--no-clock``: neither).
- ``--rate`` scales the schedule (2.0 = twice as fast; 0 = as fast as possible). When the player falls
  behind (slow machine, lockstep wait) it re-bases its schedule instead of bursting to catch up.
- ``--loop`` starts again at the end; sim time then jumps backwards, which a node must handle (reset).
  ``--continuous`` instead shifts ``/clock`` and every ``header.stamp`` forward by the bag's length on each
  pass, so time keeps increasing (soak runs).
- ``--namespace NS`` moves every topic except ``/clock`` under NS (``/observations/x`` -> ``NS/observations/x``).
- ``--wait-for TOPIC`` (lockstep): after each step's observations (a run of ``observations/`` messages, and of
  the sensor topics a ``make-bag --adapters`` bag lists as ``step_topics``, of one log time), wait until one
  ``bayes_infer_ros/msg/Beliefs`` arrives on TOPIC (relative to NS) or ``--wait-timeout`` passes. Used by the
  tests, which need every step to give exactly one tick regardless of machine load. Until the first Beliefs arrive, a step left unanswered is sent again (up to
  ``FIRST_STEP_RESENDS`` times): the player sees a subscriber as soon as its writer matched the node's reader,
  but the node's best-effort reader may match the writer a moment later and miss what was sent meanwhile.
- ``--control-gap S``: pause S seconds after each ``controls`` message. Not needed by this package's node (it
  places stamped controls by their stamp); for consumers that apply controls in arrival order.
QoS: reliable, volatile, depth ``--depth`` (compatible with best-effort SensorDataQoS subscribers and with the
best-effort ``/clock`` subscription of rclpy's TimeSource).
"""
from __future__ import annotations

import argparse
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np
import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from rclpy.utilities import remove_ros_args
from rosbags.rosbag2 import Reader
from rosgraph_msgs.msg import Clock

from bayes_infer_ros.bags.bagio import step_topic_test
from bayes_infer_ros.bags.convert import message_class
from bayes_infer_ros.bags.interfaces import current_cdr

from .recorder import BagRecorder
from .spinning import SpinThread, stop_spinning

CLOCK_TOPIC = "/clock"
FIRST_STEP_RESENDS = 5
BELIEFS_TYPE = "bayes_infer_ros/msg/Beliefs"
CONTROL_TOPIC_SUFFIXES = ("/controls", "/actions")  # /actions: bags made before the Controls message


def _shift_stamps(msg, offset_ns: int) -> None:
    """Move a decoded message forward in time: ``Clock.clock`` or ``header.stamp`` (others are left alone)."""
    stamp = getattr(msg, "clock", None)
    if stamp is None:
        header = getattr(msg, "header", None)
        stamp = getattr(header, "stamp", None)
    if stamp is not None and hasattr(stamp, "nanosec"):
        total = stamp.sec * 1_000_000_000 + stamp.nanosec + offset_ns
        stamp.sec, stamp.nanosec = divmod(total, 1_000_000_000)


def remap_topic(topic: str, namespace: Optional[str]) -> str:
    """Bag topic -> graph topic: everything but ``/clock`` moves under ``namespace``."""
    if not namespace or topic == CLOCK_TOPIC:
        return topic
    ns = "/" + namespace.strip("/")
    return ns + (topic if topic.startswith("/") else "/" + topic)


@dataclass
class ReplayStats:
    published: dict[str, int] = field(default_factory=dict)
    decode_errors: dict[str, int] = field(default_factory=dict)
    steps: int = 0
    loops: int = 0
    wall_s: float = 0.0
    wait_timeouts: int = 0
    resent_steps: int = 0  # lockstep: steps sent again because the node had not answered any step yet
    # stamp (ns, log time + loop offset) of a step -> time.monotonic() just before its last observation was
    # published (the most recent 8192 steps)
    step_published_at: dict[int, float] = field(default_factory=dict)

    def summary(self) -> str:
        total = sum(self.published.values())
        parts = [f"published {total} messages in {self.wall_s:.2f} s ({self.steps} steps, {self.loops} loop(s))"]
        if self.decode_errors:
            parts.append(f"skipped undecodable: {self.decode_errors}")
        if self.wait_timeouts:
            parts.append(f"lockstep timeouts: {self.wait_timeouts}")
        if self.resent_steps:
            parts.append(f"steps sent again before the first answer: {self.resent_steps}")
        return "; ".join(parts)


class BagPlayer:
    """Publishes one bag through ``node``'s publishers. Thread-safe to stop; spin ``node`` elsewhere.

    ``run()`` blocks until the bag (or every loop) is done or ``stop()`` is called.
    """

    def __init__(
        self,
        node,
        bag: Path,
        *,
        rate: float = 1.0,
        loop: bool = False,
        max_loops: Optional[int] = None,
        namespace: Optional[str] = None,
        topics: Optional[Sequence[str]] = None,
        exclude: Sequence[str] = (),
        clock: bool = True,
        wait_for: Optional[str] = None,
        wait_timeout: float = 2.0,
        depth: int = 100,
        raw: bool = False,
        control_gap_s: float = 0.0,
        jump_pause_s: float = 0.1,
        continuous_loop: bool = False,
        on_step: Optional[Callable[[int, float], None]] = None,
        wait_listeners: int = 0,
    ) -> None:
        if rate < 0:
            raise ValueError(f"rate must be >= 0 (0 = as fast as possible), got {rate}")
        self.node = node
        self.bag = Path(bag)
        self.rate = float(rate)
        self.loop = loop
        self.max_loops = max_loops
        self.namespace = namespace
        self.clock = clock
        self.wait_timeout = float(wait_timeout)
        self.raw = raw
        self.control_gap_s = float(control_gap_s)
        self.jump_pause_s = float(jump_pause_s)
        self.continuous_loop = continuous_loop
        self.wait_listeners = int(wait_listeners)
        if continuous_loop and raw:
            raise ValueError("continuous_loop rewrites stamps: it needs decoded messages (not raw)")
        self._last_clock_ns: Optional[int] = None
        self.on_step = on_step
        self.stats = ReplayStats()
        self._stop = threading.Event()
        self._qos = QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE,
                               durability=DurabilityPolicy.VOLATILE)
        self._is_step = step_topic_test(self.bag)
        with Reader(self.bag) as reader:
            conns = list(reader.connections)
        keep = set(topics) if topics else None
        self._connections = [c for c in conns if (keep is None or c.topic in keep) and c.topic not in set(exclude)]
        if not clock:
            self._connections = [c for c in self._connections if c.topic != CLOCK_TOPIC]
        self._bag_has_clock = any(c.topic == CLOCK_TOPIC for c in self._connections)
        self._classes: dict[int, type] = {}
        # A bag written before a field was added to our messages: its CDR in the current definition
        self._upgrade = {c.id: current_cdr(c.msgtype, c.msgdef.data) for c in self._connections}
        self._publishers: dict[int, object] = {}
        for c in self._connections:
            cls = message_class(c.msgtype)
            self._classes[c.id] = cls
            self._publishers[c.id] = node.create_publisher(cls, remap_topic(c.topic, namespace), self._qos)
        self._clock_pub = None
        if clock and not self._bag_has_clock:
            self._clock_pub = node.create_publisher(Clock, CLOCK_TOPIC, self._qos)
        # lockstep
        self._cond = threading.Condition()
        self._received = 0
        self._expected = 0
        self._answers = 0  # Beliefs received on the lockstep topic (never resynchronised)
        self._step_messages: list[tuple[Any, Any]] = []  # (publisher, message) of the step being sent
        self._wait_sub = None
        self._wait_topic = None
        if wait_for:
            self._wait_topic = remap_topic(wait_for, namespace)
            self._wait_sub = node.create_subscription(
                message_class(BELIEFS_TYPE), self._wait_topic, self._on_wait_msg, QoSProfile(depth=100))

    # ---- graph readiness ---------------------------------------------------------------------------
    @property
    def observation_topics(self) -> list[str]:
        return [remap_topic(c.topic, self.namespace) for c in self._connections if self._is_step(c.topic)]

    def wait_for_subscribers(self, timeout: float, every_topic: bool = False) -> bool:
        """Wait until every observation topic has a subscriber (and the lockstep topic a publisher).

        ``every_topic`` waits for a subscriber on every played topic and ``/clock`` instead, e.g. for a recorder of
        the whole bag (its subscriptions to ``true_states`` and the rest come up one by one)."""
        waited = [self._publishers[c.id] for c in self._connections if every_topic or self._is_step(c.topic)]
        if every_topic and self._clock_pub is not None:
            waited.append(self._clock_pub)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self._stop.is_set():
            ready = all(pub.get_subscription_count() > 0 for pub in waited)
            if self._wait_topic:
                ready = ready and self.node.count_publishers(self._wait_topic) > 0
                # this player's own subscription plus the listeners asked for (a recorder started beside it)
                ready = ready and self.node.count_subscribers(self._wait_topic) >= 1 + self.wait_listeners
            if ready:
                return True
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()

    # ---- lockstep ----------------------------------------------------------------------------------
    def _on_wait_msg(self, _msg) -> None:
        with self._cond:
            self._received += 1
            self._answers += 1
            self._cond.notify_all()

    def _end_step(self) -> None:
        self.stats.steps += 1
        step, self._step_messages = self._step_messages, []
        if self._wait_sub is None:
            return
        with self._cond:
            self._expected += 1
            answered = lambda: self._received >= self._expected or self._stop.is_set()  # noqa: E731
            ok = self._cond.wait_for(answered, timeout=self.wait_timeout)
            for _ in range(FIRST_STEP_RESENDS):
                if ok or self._answers > 0 or not step:
                    break
                self.stats.resent_steps += 1
                for pub, msg in step:
                    pub.publish(msg)
                ok = self._cond.wait_for(answered, timeout=self.wait_timeout)
            if not ok:
                self.stats.wait_timeouts += 1
                self._received = self._expected  # resynchronise: one missing tick must not stall every later step

    # ---- playback ----------------------------------------------------------------------------------
    def _after_clock(self, ns: int) -> None:
        # A backwards jump (next loop): let subscribers see the new time before data stamped with it arrives,
        # or a node could judge the first observations against the old time.
        if self._last_clock_ns is not None and ns < self._last_clock_ns and self.jump_pause_s > 0:
            self._stop.wait(self.jump_pause_s)
        self._last_clock_ns = ns

    def _publish_clock(self, ns: int) -> None:
        msg = Clock()
        msg.clock.sec, msg.clock.nanosec = divmod(int(ns), 1_000_000_000)
        self._clock_pub.publish(msg)
        self.stats.published[CLOCK_TOPIC] = self.stats.published.get(CLOCK_TOPIC, 0) + 1
        self._after_clock(ns)

    def run(self) -> ReplayStats:
        start = time.monotonic()
        loops = 0
        offset_ns = 0  # continuous_loop: added to /clock, header stamps and log times from the 2nd pass on
        pass_ns = 0
        while not self._stop.is_set():
            bag_t0: Optional[int] = None
            wall_t0 = time.monotonic()
            last_ns: Optional[int] = None
            step_has_obs = False
            step_ns = None
            with Reader(self.bag) as reader:
                conns = [c for c in reader.connections if c.id in self._publishers]
                for conn, ns, rawdata in reader.messages(connections=conns):
                    if self._stop.is_set():
                        break
                    # a step ends with its last observation: at the first other message after it
                    if step_has_obs and (not self._is_step(conn.topic) or ns + offset_ns != step_ns):
                        self._finish_step(step_ns)
                        step_has_obs = False
                    if bag_t0 is None:
                        bag_t0 = ns
                    if self.rate > 0:
                        due = wall_t0 + (ns - bag_t0) / 1e9 / self.rate
                        now = time.monotonic()
                        if due > now:
                            self._stop.wait(due - now)
                        elif now - due > 0.05:  # fell behind: re-base rather than burst
                            wall_t0 += now - due
                    if self._clock_pub is not None and ns != last_ns:
                        self._publish_clock(ns + offset_ns)
                    if last_ns is not None and ns > last_ns:
                        pass_ns = max(pass_ns, ns - last_ns)  # largest step: the seam between two passes
                    last_ns = ns
                    try:
                        raw = self._upgrade[conn.id](bytes(rawdata))
                        msg = raw if self.raw else deserialize_message(raw, self._classes[conn.id])
                        if offset_ns:
                            _shift_stamps(msg, offset_ns)
                    except Exception as exc:  # a corrupt record must not end the replay
                        self.stats.decode_errors[conn.topic] = self.stats.decode_errors.get(conn.topic, 0) + 1
                        self.node.get_logger().warning(f"skipping undecodable message on {conn.topic} at {ns}: {exc}")
                        continue
                    if self._is_step(conn.topic):
                        step_has_obs = True
                        step_ns = ns + offset_ns
                        # before publish: a fast subscriber's answer must never see an older time
                        self.stats.step_published_at[step_ns] = time.monotonic()
                        if len(self.stats.step_published_at) > 8192:  # long loops: keep the recent steps only
                            del self.stats.step_published_at[next(iter(self.stats.step_published_at))]
                    self._publishers[conn.id].publish(msg)
                    if self._is_step(conn.topic):
                        self._step_messages.append((self._publishers[conn.id], msg))
                    self.stats.published[conn.topic] = self.stats.published.get(conn.topic, 0) + 1
                    if conn.topic == CLOCK_TOPIC:
                        self._after_clock(ns + offset_ns)
                    if self.control_gap_s > 0 and conn.topic.endswith(CONTROL_TOPIC_SUFFIXES):
                        self._stop.wait(self.control_gap_s)
                if step_has_obs and not self._stop.is_set():
                    self._finish_step(step_ns)
            loops += 1
            self.stats.loops = loops
            if self.continuous_loop and bag_t0 is not None and last_ns is not None:
                offset_ns += (last_ns - bag_t0) + max(pass_ns, 1)
            if not self.loop or (self.max_loops is not None and loops >= self.max_loops):
                break
        self.stats.wall_s = time.monotonic() - start
        return self.stats

    def _finish_step(self, step_ns: Optional[int]) -> None:
        if self.on_step is not None and step_ns is not None:
            self.on_step(step_ns, self.stats.step_published_at.get(step_ns, time.monotonic()))
        self._end_step()


@dataclass
class BeliefSample:
    """One received ``Beliefs``: receive time (this process's monotonic clock) and the decoded content."""

    received: float
    stamp_ns: int
    tick: int
    algorithm: str
    variant: str
    inference_ms: float
    names: list[str]
    probabilities: list  # per factor, np.ndarray (n_f,) float32
    latency_s: Optional[float] = None  # receive time - publish time of the step's last observation


class ReplaySession:
    """A private rclpy context with one node that plays a bag, listens to ``beliefs`` and may record them.

    For the demo, the tests and the soak benchmark: ``with ReplaySession(bag, namespace=ns) as s:
    s.wait_ready(); s.play(rate=...); s.drain()``, then ``s.beliefs`` and :meth:`latencies_s`.
    Latency of a tick = receive time of its Beliefs minus the time the player published the step's last
    observation (matched by ``header.stamp`` = the newest observation used), both taken in this process.
    """

    def __init__(self, bag: Path, *, namespace: Optional[str] = None, record_to: Optional[Path] = None,
                 node_name: str = "bayes_infer_replay", on_beliefs: Optional[Callable[[BeliefSample], None]] = None,
                 keep_beliefs: bool = True):
        self.bag = Path(bag)
        self.namespace = namespace
        self.record_to = record_to
        self.node_name = node_name
        self.on_beliefs = on_beliefs
        self.beliefs: list[BeliefSample] = []
        self.keep_beliefs = keep_beliefs  # False (soak): keep only counts, latencies and inference times
        self.received = 0
        self.latencies: list[float] = []
        self.inference_ms: list[float] = []
        self.player: Optional[BagPlayer] = None
        self.recorder = None
        self.stats: Optional[ReplayStats] = None
        self._lock = threading.Lock()

    @property
    def beliefs_topic(self) -> str:
        return remap_topic("/beliefs", self.namespace)

    def __enter__(self) -> "ReplaySession":
        self.context = Context()
        rclpy.init(args=[], context=self.context)
        self.node = rclpy.create_node(self.node_name, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._sub = self.node.create_subscription(
            message_class(BELIEFS_TYPE), self.beliefs_topic, self._on_beliefs,
            QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE))
        self._spin = SpinThread(self.executor, name="replay")
        if self.record_to is not None:
            self.recorder = BagRecorder(self.node, self.record_to)
        return self

    def __exit__(self, *exc) -> None:
        if self.player is not None:
            self.player.stop()
        if self.recorder is not None:
            self.recorder.close()
        stop_spinning(self.executor, self._spin, self.node, self.context)

    def _on_beliefs(self, msg) -> None:
        sample = BeliefSample(
            received=time.monotonic(),
            stamp_ns=msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec,
            tick=int(msg.tick), algorithm=msg.algorithm, variant=msg.variant, inference_ms=float(msg.inference_ms),
            names=[b.name for b in msg.factors],
            probabilities=[np.asarray(b.probabilities, dtype=np.float32) for b in msg.factors])
        player = self.player
        if player is not None:  # the step this tick answers is the latest published one with that stamp
            published = player.stats.step_published_at.get(sample.stamp_ns)
            if published is not None:
                sample.latency_s = sample.received - published
        with self._lock:
            self.received += 1
            if self.keep_beliefs:
                self.beliefs.append(sample)
            else:
                self.inference_ms.append(sample.inference_ms)
                if sample.latency_s is not None:
                    self.latencies.append(sample.latency_s)
        if self.on_beliefs is not None:
            self.on_beliefs(sample)

    def wait_ready(self, timeout: float, observation_topics: Optional[Sequence[str]] = None) -> bool:
        """Wait until the agent subscribes every observation topic of the bag and publishes ``beliefs``
        (and, when recording, until the recorder subscribed ``beliefs``)."""
        deadline = time.monotonic() + timeout
        if observation_topics is None:
            is_step = step_topic_test(self.bag)
            with Reader(self.bag) as reader:
                observation_topics = [remap_topic(c.topic, self.namespace) for c in reader.connections
                                      if is_step(c.topic)]
        while time.monotonic() < deadline:
            if (all(self.node.count_subscribers(t) > 0 for t in observation_topics)
                    and self.node.count_publishers(self.beliefs_topic) > 0):
                if self.recorder is not None:
                    self.recorder.wait_and_add([self.beliefs_topic], max(deadline - time.monotonic(), 0.1))
                return True
            time.sleep(0.05)
        return False

    def play(self, settle_s: float = 0.5, **player_kwargs) -> ReplayStats:
        """Play the bag once (kwargs: see :class:`BagPlayer`); blocks until done."""
        self.player = BagPlayer(self.node, self.bag, namespace=self.namespace, **player_kwargs)
        if not self.player.wait_for_subscribers(5.0):
            self.node.get_logger().warning(f"no subscriber on some of {self.player.observation_topics}")
        # Our side has matched the node's subscriptions; give its side a moment to match our new publishers,
        # or the first step can be lost (DDS discovery is not symmetric in time).
        time.sleep(settle_s)
        self.stats = self.player.run()
        return self.stats

    def drain(self, expected: int, timeout: float) -> bool:
        """Wait until ``expected`` Beliefs have arrived and, when recording, the recorder has written as many
        (True), or ``timeout`` s pass (False). The recorder has its own subscription: its callback for the last
        message can run after ours."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                received = self.received
            recorded = expected if self.recorder is None else self.recorder.counts.get(self.beliefs_topic, 0)
            if received >= expected and recorded >= expected:
                return True
            time.sleep(0.02)
        return False

    def latencies_s(self) -> list[float]:
        """Receive - publish time (s) of every received Beliefs that answers a played step."""
        with self._lock:
            if not self.keep_beliefs:
                return list(self.latencies)
            return [b.latency_s for b in self.beliefs if b.latency_s is not None]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bayes-infer replay", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bag", type=Path, help="rosbag2 folder (MCAP or SQLite3)")
    p.add_argument("--rate", type=float, default=1.0, help="playback speed factor; 0 = as fast as possible")
    p.add_argument("--loop", action="store_true", help="start again at the end (sim time jumps back)")
    p.add_argument("--continuous", action="store_true", help="with --loop: keep time increasing across passes")
    p.add_argument("--loops", type=int, default=None, help="with --loop: stop after this many passes")
    p.add_argument("--namespace", default=None, help="prefix every topic except /clock")
    p.add_argument("--topics", nargs="+", default=None, help="only these bag topics")
    p.add_argument("--exclude", nargs="+", default=[], help="skip these bag topics")
    p.add_argument("--no-clock", action="store_true", help="publish no /clock")
    p.add_argument("--wait-for", default=None, metavar="TOPIC",
                   help="lockstep: after each observation step wait for one Beliefs on TOPIC")
    p.add_argument("--wait-timeout", type=float, default=2.0)
    p.add_argument("--wait-listeners", type=int, default=0, metavar="N",
                   help="with --wait-for: before starting, also wait for N other subscribers on TOPIC (a recorder)")
    p.add_argument("--wait-subscribers", type=float, default=5.0, metavar="S",
                   help="wait up to S seconds for subscribers on the observation topics before starting")
    p.add_argument("--wait-every-topic", action="store_true",
                   help="with --wait-subscribers: wait for a subscriber on every played topic, not only observations")
    p.add_argument("--depth", type=int, default=100, help="publisher queue depth")
    p.add_argument("--control-gap", type=float, default=0.0, metavar="S", help="pause after each controls message")
    p.add_argument("--raw", action="store_true", help="publish the bag's CDR bytes as they are (no decode check)")
    return p


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(remove_ros_args(["replay"] + argv)[1:])
    if not (args.bag / "metadata.yaml").is_file():
        print(f"replay: {args.bag} is not a rosbag2 folder (no metadata.yaml)", file=sys.stderr)
        return 2
    rclpy.init(args=["replay"] + argv)
    node = rclpy.create_node("bayes_infer_replay")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    spin = SpinThread(executor, name="spin")
    try:
        player = BagPlayer(node, args.bag, rate=args.rate, loop=args.loop, max_loops=args.loops,
                           namespace=args.namespace, topics=args.topics, exclude=args.exclude,
                           clock=not args.no_clock, wait_for=args.wait_for, wait_timeout=args.wait_timeout,
                           depth=args.depth, raw=args.raw, control_gap_s=args.control_gap,
                           continuous_loop=args.continuous, wait_listeners=args.wait_listeners)
        if args.wait_subscribers > 0 and not player.wait_for_subscribers(args.wait_subscribers,
                                                                         every_topic=args.wait_every_topic):
            node.get_logger().warning(
                f"no subscriber yet on some of {player.observation_topics} (or the --wait-for topic's publisher and "
                f"listeners) after {args.wait_subscribers} s; playing anyway")
        try:
            stats = player.run()
        except KeyboardInterrupt:
            player.stop()
            stats = player.stats
        print(stats.summary(), flush=True)
        return 0
    except (ImportError, ValueError) as exc:
        print(f"replay: {exc}", file=sys.stderr)
        return 1
    finally:
        stop_spinning(executor, spin, node)


if __name__ == "__main__":
    sys.exit(main())
