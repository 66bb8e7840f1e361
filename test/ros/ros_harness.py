"""Test harness for the node over a real ROS graph: the lab's (``lab/ros_graph.py``: a per-run domain id on loopback,
the node started as ``ros2 run`` would, a probe node spun in a background thread), under the names the tests use.
"""
from __future__ import annotations

from lab.agent_process import agent_executable
from lab.ros_graph import (REPO_ROOT, Probe, change_state, claim_domain_id, default_params, latest_status,
                           ros_unavailable_reason, set_loopback_env, start_agent, status_values, wait_for)

AgentProcess = start_agent

__all__ = ["REPO_ROOT", "AgentProcess", "Probe", "agent_executable", "change_state", "claim_domain_id",
           "default_params", "latest_status", "publish_until_beliefs", "reliable_subscriptions",
           "ros_unavailable_reason", "set_loopback_env", "status_values", "wait_for"]


def publish_until_beliefs(probe: Probe, ns: str, beliefs: list, levels: dict[str, int], timeout: float) -> bool:
    """Publish one observation of each modality (``levels``: modality -> level) under ``ns`` until the node's
    first Beliefs arrive: a brand-new publisher may not be matched by the node's reader yet, so the first messages
    can be lost."""
    import time

    from bayes_infer_ros.msg import CategoricalObservation

    pubs = {m: probe.publisher(f"{ns}/observations/{m}", CategoricalObservation) for m in levels}
    if not wait_for(lambda: all(p.get_subscription_count() >= 1 for p in pubs.values()), 20):
        return False
    end = time.monotonic() + timeout
    while not beliefs and time.monotonic() < end:
        for m, pub in pubs.items():
            pub.publish(CategoricalObservation(level=levels[m]))
        wait_for(lambda: len(beliefs) >= 1, 0.5)
    return bool(beliefs)


def reliable_subscriptions(topics, transient_local: bool = False) -> dict:
    """A node's ``qos_overrides`` making its subscriptions to ``topics`` (resolved names) reliable (and transient
    local): a test that sends each step once, after ``get_subscription_count()`` saw the node's reader, loses none
    of it, though the node's reader may match the probe's writer a moment later or the machine be loaded. Its
    observation topics are best effort by default (SensorDataQoS), where such a message can be lost."""
    policy = {"reliability": "reliable", **({"durability": "transient_local"} if transient_local else {})}
    return {topic: {"subscription": dict(policy)} for topic in topics}
