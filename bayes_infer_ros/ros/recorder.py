"""Recording topics of a running graph into a rosbag2 MCAP bag (:class:`BagRecorder`; ``bayes-infer record``:
``cli/record.py``).

Subscribes with rclpy and writes with ``rosbags``: each received message is converted field by field into the
rosbags object of the same type and serialised by rosbags (rclpy's own CDR may carry trailing padding that
rosbags refuses to read back). Like ``ros2 bag record``, the subscription QoS adapts to the publishers found
(reliable only when every publisher is reliable, transient local only when every one is) and messages are stamped with their receive time on the
recorder's clock (sim time with ``--use-sim-time``).
"""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rosbags.rosbag2 import StoragePlugin, Writer

from bayes_infer_ros.bags.bagio import METADATA_VERSION
from bayes_infer_ros.bags.convert import message_class, to_rosbags
from bayes_infer_ros.bags.interfaces import make_typestore



def resolve_topic(topic: str, namespace: Optional[str]) -> str:
    if topic.startswith("/"):
        return topic
    ns = "/" + (namespace or "").strip("/")
    return (ns.rstrip("/") + "/" + topic) if ns != "/" else "/" + topic


class BagRecorder:
    """Records topics of ``node``'s graph into a new MCAP bag at ``out``. Call :meth:`close` to finish the bag.

    ``on_message(topic, msg, receive_monotonic)`` is called for every message (before it is written), so a
    caller can measure latency on the same receive timestamps.
    """

    def __init__(self, node, out: Path, *, depth: int = 1000,
                 on_message: Optional[Callable[[str, Any, float], None]] = None) -> None:
        self.node = node
        self.out = Path(out)
        self.depth = depth
        self.on_message = on_message
        self.store = make_typestore()
        self.counts: dict[str, int] = {}
        self.errors: dict[str, int] = {}
        self._lock = threading.Lock()
        self._writer = Writer(self.out, version=METADATA_VERSION, storage_plugin=StoragePlugin.MCAP)
        self._writer.open()
        self._connections: dict[str, Any] = {}
        self._subscriptions = []
        self._closed = False

    def _qos_for(self, topic: str):
        infos = self.node.get_publishers_info_by_topic(topic)
        reliable = bool(infos) and all(i.qos_profile.reliability == ReliabilityPolicy.RELIABLE for i in infos)
        # transient local only when every publisher keeps its latest (the agent's beliefs): then a recorder that
        # starts late still gets it
        latched = bool(infos) and all(i.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL for i in infos)
        return QoSProfile(depth=self.depth,
                          reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
                          durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE)

    def add_topic(self, topic: str, typename: str) -> None:
        """Subscribe ``topic`` (fully qualified) of type ``pkg/msg/Name`` and record it."""
        if topic in self._connections:
            return
        if typename not in self.store.types:
            raise ValueError(f"cannot record {topic}: type {typename} is unknown to the rosbags typestore")
        cls = message_class(typename)
        with self._lock:
            self._connections[topic] = self._writer.add_connection(topic, typename, typestore=self.store)
        callback = lambda msg, _t=topic, _n=typename: self._on_msg(_t, _n, msg)  # noqa: E731
        self._subscriptions.append(self.node.create_subscription(cls, topic, callback, self._qos_for(topic)))

    def wait_and_add(self, topics: Sequence[str], timeout: float, typename: Optional[str] = None) -> list[str]:
        """Wait up to ``timeout`` s for each topic to have a publisher, then subscribe it with the graph's type
        (or ``typename``). Returns the topics that never appeared (not subscribed)."""
        pending = list(topics)
        deadline = time.monotonic() + timeout
        while pending:
            graph = dict(self.node.get_topic_names_and_types())
            for topic in list(pending):
                if topic in graph and self.node.count_publishers(topic) > 0:
                    self.add_topic(topic, typename or graph[topic][0])
                    pending.remove(topic)
            if not pending or time.monotonic() > deadline or not self.node.context.ok():  # ok: SIGTERM
                break
            time.sleep(0.05)
        return pending

    def _on_msg(self, topic: str, typename: str, msg) -> None:
        received = time.monotonic()
        if self.on_message is not None:
            self.on_message(topic, msg, received)
        try:
            data = self.store.serialize_cdr(to_rosbags(msg, typename, self.store), typename)
        except Exception as exc:  # keep recording the rest
            self.errors[topic] = self.errors.get(topic, 0) + 1
            self.node.get_logger().warning(f"cannot serialise a message on {topic}: {exc}")
            return
        stamp = self.node.get_clock().now().nanoseconds
        with self._lock:
            if self._closed:
                return
            self._writer.write(self._connections[topic], stamp, data)
            self.counts[topic] = self.counts.get(topic, 0) + 1

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for sub in self._subscriptions:
                self.node.destroy_subscription(sub)
            self._writer.close()
