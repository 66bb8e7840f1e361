"""A bag played into a running agent, its Beliefs collected: the demo's, the tests' and the soak benchmark's harness.

``ReplaySession`` owns a private rclpy context with one node that plays a bag (``ros.replay.BagPlayer``), listens
to ``beliefs`` (and the node's ``~/policy`` when asked), matches each Beliefs to the step it answers and may record
them (``ros.recorder.BagRecorder``).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np
import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rosbags.rosbag2 import Reader

from bayes_infer_ros.bags.bagio import step_topic_test
from bayes_infer_ros.bags.convert import message_class
from bayes_infer_ros.bags.interfaces import POLICY_TYPE
from bayes_infer_ros.ros.recorder import BagRecorder
from bayes_infer_ros.ros.replay import BELIEFS_TYPE, BagPlayer, PlaybackOptions, ReplayStats, remap_topic
from bayes_infer_ros.ros.spinning import SpinThread, stop_spinning


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
    free_energy: float = float("nan")  # the evidence (NaN / None when the node computes none)
    surprise: Optional[np.ndarray] = None  # (M,) nats
    outliers: Optional[np.ndarray] = None  # (M,) bool


@dataclass
class PolicySample:
    """One received ``Policy``: receive time (monotonic), the stamp and tick (those of the step's Beliefs), the policies
    (P, T, F), neg_efe and q_pi (P,), the chosen policy and controls (F,) with their labels, and the rest."""

    received: float
    stamp_ns: int
    tick: int
    factors: list[str]
    policies: np.ndarray
    neg_efe: np.ndarray
    q_pi: np.ndarray
    policy: int
    controls: np.ndarray
    control_labels: list[str]
    selection: str
    sampling_mode: str
    fed_back: bool
    inference_ms: float
    policy_ms: float

    @classmethod
    def from_message(cls, msg, received: float) -> "PolicySample":
        return cls(received, msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec, int(msg.tick),
                   list(msg.factors), np.asarray(msg.policies, np.int64).reshape(tuple(msg.policies_shape)),
                   np.asarray(msg.neg_efe, np.float32), np.asarray(msg.q_pi, np.float32), int(msg.policy),
                   np.asarray(msg.controls, np.int64), list(msg.control_labels), msg.selection, msg.sampling_mode,
                   bool(msg.fed_back), float(msg.inference_ms), float(msg.policy_ms))


@dataclass
class DiagnosticSample:
    """One of the agent's /diagnostics statuses: receive time (monotonic), level, message, key/values."""

    received: float
    level: int
    message: str
    values: dict


class ReplaySession:
    """A private rclpy context with one node that plays a bag, listens to ``beliefs`` and may record them.

    For the demo, the tests and the soak benchmark: ``with ReplaySession(bag, namespace=ns) as s:
    s.wait_ready(); s.play(rate=...); s.drain()``, then ``s.beliefs`` and :meth:`latencies_s`.
    Latency of a tick = receive time of its Beliefs minus the time the player published the step's last
    observation (matched by ``header.stamp`` = the newest observation used), both taken in this process.
    """

    def __init__(self, bag: Path, *, namespace: Optional[str] = None, record_to: Optional[Path] = None,
                 node_name: str = "bayes_infer_replay", on_beliefs: Optional[Callable[[BeliefSample], None]] = None,
                 keep_beliefs: bool = True, diagnostics: bool = False, policy_topic: Optional[str] = None):
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
        self.collect_diagnostics = diagnostics  # keep the agent's /diagnostics statuses (``self.diagnostics``)
        self.diagnostics: list[DiagnosticSample] = []
        # the agent's ~/policy, resolved (e.g. /ns/agent/policy): its Policy messages kept in ``self.policies``
        self.policy_topic = policy_topic
        self.policies: list[PolicySample] = []
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
        if self.collect_diagnostics:
            self._diag_sub = self.node.create_subscription(
                message_class("diagnostic_msgs/msg/DiagnosticArray"), "/diagnostics", self._on_diagnostics,
                QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE))
        if self.policy_topic is not None:
            self._policy_sub = self.node.create_subscription(
                message_class(POLICY_TYPE), self.policy_topic, self._on_policy,
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
            probabilities=[np.asarray(b.probabilities, dtype=np.float32) for b in msg.factors],
            free_energy=float(msg.free_energy),
            surprise=np.asarray(msg.surprise, dtype=np.float32) if len(msg.surprise) else None,
            outliers=np.asarray(msg.outliers, dtype=bool) if len(msg.outliers) else None)
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

    def _on_policy(self, msg) -> None:
        sample = PolicySample.from_message(msg, time.monotonic())
        with self._lock:
            self.policies.append(sample)

    def _on_diagnostics(self, msg) -> None:
        now = time.monotonic()
        with self._lock:
            for status in msg.status:
                if status.name.endswith(": inference"):
                    self.diagnostics.append(DiagnosticSample(now, int.from_bytes(bytes(status.level), "little")
                                                             if isinstance(status.level, (bytes, bytearray))
                                                             else int(status.level), str(status.message),
                                                             {kv.key: kv.value for kv in status.values}))

    def wait_ready(self, timeout: float, observation_topics: Optional[Sequence[str]] = None) -> bool:
        """Wait until the agent subscribes every observation topic of the bag and publishes ``beliefs`` (and its
        ``~/policy`` when the session listens to it; when recording, until the recorder subscribed them)."""
        deadline = time.monotonic() + timeout
        if observation_topics is None:
            is_step = step_topic_test(self.bag)
            with Reader(self.bag) as reader:
                observation_topics = [remap_topic(c.topic, self.namespace) for c in reader.connections
                                      if is_step(c.topic)]
        while time.monotonic() < deadline:
            published = [self.beliefs_topic] + ([self.policy_topic] if self.policy_topic is not None else [])
            if (all(self.node.count_subscribers(t) > 0 for t in observation_topics)
                    and all(self.node.count_publishers(t) > 0 for t in published)):
                if self.recorder is not None:
                    self.recorder.wait_and_add(published, max(deadline - time.monotonic(), 0.1))
                return True
            time.sleep(0.05)
        return False

    def play(self, settle_s: float = 0.5, **options) -> ReplayStats:
        """Play the bag once (``options``: :class:`~bayes_infer_ros.ros.replay.PlaybackOptions`'s fields, the
        session's namespace added); blocks until done."""
        self.player = BagPlayer(self.node, self.bag, PlaybackOptions(namespace=self.namespace, **options))
        if not self.player.wait_for_subscribers(5.0):
            self.node.get_logger().warning(f"no subscriber on some of {self.player.observation_topics}")
        # Our side has matched the node's subscriptions; give its side a moment to match our new publishers,
        # or the first step can be lost (DDS discovery is not symmetric in time).
        time.sleep(settle_s)
        self.stats = self.player.run()
        return self.stats

    def drain(self, expected: int, timeout: float) -> bool:
        """Wait until ``expected`` Beliefs (and Policy messages, when listened to) have arrived and, when recording,
        the recorder has written as many (True), or ``timeout`` s pass (False). The recorder has its own
        subscription: its callback for the last message can run after ours."""
        deadline = time.monotonic() + timeout
        topics = [self.beliefs_topic] + ([self.policy_topic] if self.policy_topic is not None else [])
        while time.monotonic() < deadline:
            with self._lock:
                received = min(self.received, len(self.policies) if self.policy_topic is not None else self.received)
            recorded = expected if self.recorder is None else min(self.recorder.counts.get(t, 0) for t in topics)
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


