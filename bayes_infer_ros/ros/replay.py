"""Publishing a rosbag2 bag into a running ROS 2 graph, in log-time order (``bayes-infer replay BAG``: cli/replay.py).

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
  An unstamped command (one of the ``control_topics`` a ``make-bag --adapters`` bag lists whose type has no header,
  e.g. a Twist on ``cmd_vel``) is waited on until every reliable subscriber has acknowledged it (at most
  ``--wait-timeout``; its publisher keeps one sample, which Fast DDS acknowledges at once) before anything else is
  published: the node places it by its arrival, which must come before the next step's observations. Stamped
  controls need no wait.
- ``--control-gap S``: pause S seconds after each ``controls`` message. Not needed by this package's node (it
  places stamped controls by their stamp); for consumers that apply controls in arrival order.
QoS: reliable, volatile, depth ``--depth`` (compatible with best-effort SensorDataQoS subscribers and with the
best-effort ``/clock`` subscription of rclpy's TimeSource).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from rclpy.duration import Duration
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from rosbags.rosbag2 import Reader
from rosgraph_msgs.msg import Clock

from bayes_infer_ros.bags.bagio import read_custom_data, step_topic_test
from bayes_infer_ros.bags.sensor_messages import CONTROL_TOPICS_KEY
from bayes_infer_ros.bags.convert import message_class
from bayes_infer_ros.bags.interfaces import current_cdr


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


@dataclass(frozen=True)
class PlaybackOptions:
    """How :class:`BagPlayer` plays a bag (the ``bayes-infer replay`` options).

    rate: schedule speed factor (0 = as fast as possible); loop / max_loops: start again at the end (sim time jumps
    back, ``jump_pause_s`` after the jump), ``continuous_loop``: shift ``/clock`` and every ``header.stamp`` by the
    bag's length instead; namespace: prefix of every topic but ``/clock``; topics / exclude: which bag topics;
    clock: publish ``/clock``; wait_for / wait_timeout / wait_listeners: lockstep on a Beliefs topic; depth: the
    publishers' queue; raw: publish the bag's CDR as it is; control_gap_s: pause after each controls message.
    """

    rate: float = 1.0
    loop: bool = False
    max_loops: Optional[int] = None
    namespace: Optional[str] = None
    topics: Optional[Sequence[str]] = None
    exclude: Sequence[str] = ()
    clock: bool = True
    wait_for: Optional[str] = None
    wait_timeout: float = 2.0
    depth: int = 100
    raw: bool = False
    control_gap_s: float = 0.0
    jump_pause_s: float = 0.1
    continuous_loop: bool = False
    wait_listeners: int = 0


class BagPlayer:
    """Publishes one bag through ``node``'s publishers as ``options`` say; ``on_step(step_ns, published_at)`` after
    each observation step. Thread-safe to stop; spin ``node`` elsewhere.

    ``run()`` blocks until the bag (or every loop) is done or ``stop()`` is called.
    """

    def __init__(self, node, bag: Path, options: Optional["PlaybackOptions"] = None,
                 on_step: Optional[Callable[[int, float], None]] = None) -> None:
        o = options or PlaybackOptions()
        if o.rate < 0:
            raise ValueError(f"rate must be >= 0 (0 = as fast as possible), got {o.rate}")
        if o.continuous_loop and o.raw:
            raise ValueError("continuous_loop rewrites stamps: it needs decoded messages (not raw)")
        self.node = node
        self.bag = Path(bag)
        self.rate = float(o.rate)
        self.loop = o.loop
        self.max_loops = o.max_loops
        self.namespace = o.namespace
        self.clock = o.clock
        self.wait_timeout = float(o.wait_timeout)
        self.raw = o.raw
        self.control_gap_s = float(o.control_gap_s)
        self.jump_pause_s = float(o.jump_pause_s)
        self.continuous_loop = o.continuous_loop
        self.wait_listeners = int(o.wait_listeners)
        self._last_clock_ns: Optional[int] = None
        self.on_step = on_step
        self.stats = ReplayStats()
        self._stop = threading.Event()
        self._qos = QoSProfile(depth=o.depth, reliability=ReliabilityPolicy.RELIABLE,
                               durability=DurabilityPolicy.VOLATILE)
        self._is_step = step_topic_test(self.bag)
        commands = set(filter(None, read_custom_data(self.bag).get(CONTROL_TOPICS_KEY, "").split(",")))
        self._is_control = lambda topic: topic.endswith(CONTROL_TOPIC_SUFFIXES) or topic in commands  # noqa: E731
        with Reader(self.bag) as reader:
            conns = list(reader.connections)
        keep = set(o.topics) if o.topics else None
        self._connections = [c for c in conns if (keep is None or c.topic in keep) and c.topic not in set(o.exclude)]
        if not o.clock:
            self._connections = [c for c in self._connections if c.topic != CLOCK_TOPIC]
        self._bag_has_clock = any(c.topic == CLOCK_TOPIC for c in self._connections)
        self._classes: dict[int, type] = {}
        # A bag written before a field was added to our messages: its CDR in the current definition
        self._upgrade = {c.id: current_cdr(c.msgtype, c.msgdef.data) for c in self._connections}
        self._publishers: dict[int, object] = {}
        # lockstep: the unstamped commands whose arrival must precede the next step (waited on until acknowledged;
        # published with depth 1: Fast DDS acknowledges a sample at once when the writer's history is full, else at
        # its next heartbeat, 3 s later)
        self._unstamped_commands: set[int] = set()
        command_qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)
        for c in self._connections:
            cls = message_class(c.msgtype)
            self._classes[c.id] = cls
            unstamped = c.topic in commands and "header" not in cls.get_fields_and_field_types()
            if unstamped:
                self._unstamped_commands.add(c.id)
            self._publishers[c.id] = node.create_publisher(cls, remap_topic(c.topic, o.namespace),
                                                           command_qos if unstamped and o.wait_for else self._qos)
        self._clock_pub = None
        if o.clock and not self._bag_has_clock:
            self._clock_pub = node.create_publisher(Clock, CLOCK_TOPIC, self._qos)
        # lockstep
        self._cond = threading.Condition()
        self._received = 0
        self._expected = 0
        self._answers = 0  # Beliefs received on the lockstep topic (never resynchronised)
        self._step_messages: list[tuple[Any, Any]] = []  # (publisher, message) of the step being sent
        self._wait_sub = None
        self._wait_topic = None
        if o.wait_for:
            self._wait_topic = remap_topic(o.wait_for, o.namespace)
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
                    if self._wait_sub is not None and conn.id in self._unstamped_commands:
                        self._publishers[conn.id].wait_for_all_acked(Duration(seconds=self.wait_timeout))
                    if self.control_gap_s > 0 and self._is_control(conn.topic):
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
