#!/usr/bin/env python3
"""A perception node of its own: it classifies a signal and publishes the class as a
``bayes_infer_ros/CategoricalObservation`` *by label*, so it need not know the model's level order.

The signal here is simulated (a 24 V battery that drains and recharges, with sensor noise); a real node would
subscribe to its sensor instead. The classifier is a threshold list: ``thresholds`` ascending, ``labels`` one
more than thresholds; a value below ``thresholds[0]`` is ``labels[0]``, and so on. The defaults match the default
model's ``voltage`` modality (config/agent.yaml: high / medium / low).

    python examples/perception_node.py --ros-args -r __ns:=/robot1 -p modality:=voltage -p rate_hz:=10.0

publishes ``/robot1/observations/voltage`` (best effort, as the agent subscribes). Parameters: ``modality``,
``labels``, ``thresholds``, ``rate_hz``, ``low_v`` and ``high_v`` (the simulated signal's range), ``noise_v``,
``seed``. For a sensor that already publishes a standard message (BatteryState, LaserScan, ...), the agent's
sensor adapters (``adapters.<modality>.*``, README) need no node at all.
"""
from __future__ import annotations

import bisect
import sys
from typing import Optional, Sequence

import numpy as np
import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data

from bayes_infer_ros.msg import CategoricalObservation


def classify(value: float, thresholds: Sequence[float], labels: Sequence[str]) -> str:
    """The label of ``value``: ``labels[k]`` for ``thresholds[k-1] <= value < thresholds[k]``."""
    if len(labels) != len(thresholds) + 1 or list(thresholds) != sorted(thresholds):
        raise ValueError(f"expected ascending thresholds and one label more: {list(thresholds)}, {list(labels)}")
    return labels[bisect.bisect_right(list(thresholds), value)]


def simulated_voltage(t_s: float, low_v: float, high_v: float, period_s: float = 20.0) -> float:
    """A triangle wave between ``low_v`` and ``high_v`` (drain, then recharge) over ``period_s`` seconds."""
    phase = (t_s % period_s) / period_s
    return high_v - (high_v - low_v) * (2 * phase if phase < 0.5 else 2 - 2 * phase)


class PerceptionNode(Node):
    """Publishes one labelled observation per timer tick on ``observations/<modality>``."""

    def __init__(self) -> None:
        super().__init__("perception")
        self.modality = self.declare_parameter("modality", "voltage").value
        self.labels = list(self.declare_parameter("labels", ["low", "medium", "high"]).value)
        self.thresholds = [float(x) for x in self.declare_parameter("thresholds", [23.0, 25.0]).value]
        rate = float(self.declare_parameter("rate_hz", 10.0).value)
        self.low_v = float(self.declare_parameter("low_v", 21.0).value)
        self.high_v = float(self.declare_parameter("high_v", 28.0).value)
        self.noise_v = float(self.declare_parameter("noise_v", 0.2).value)
        self.rng = np.random.default_rng(int(self.declare_parameter("seed", 0).value))
        classify(0.0, self.thresholds, self.labels)  # refuse a bad classifier at start
        self.pub = self.create_publisher(CategoricalObservation, f"observations/{self.modality}",
                                         qos_profile_sensor_data)
        self.start = self.get_clock().now()
        self.sent = 0
        self.create_timer(1.0 / rate, self.tick)

    def tick(self) -> None:
        now = self.get_clock().now()
        t_s = (now - self.start).nanoseconds * 1e-9
        value = simulated_voltage(t_s, self.low_v, self.high_v) + self.noise_v * float(self.rng.standard_normal())
        msg = CategoricalObservation()
        msg.header.stamp = now.to_msg()
        msg.label = classify(value, self.thresholds, self.labels)  # level stays 0: the label gives it
        self.pub.publish(msg)
        self.sent += 1


def main(argv: Optional[Sequence[str]] = None) -> int:
    rclpy.init(args=list(sys.argv if argv is None else argv))
    node = PerceptionNode()
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
