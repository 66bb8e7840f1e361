"""Fixtures for the ROS graph tests: one domain id and one rclpy context per test run, loopback only."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # ros_harness

import ros_harness  # noqa: E402


@pytest.fixture(scope="session")
def ros_graph(tmp_path_factory):
    """rclpy initialised with ROS_DOMAIN_ID in 50..99 (locked for this run) and LOCALHOST discovery."""
    reason = ros_harness.ros_unavailable_reason()
    if reason:
        pytest.skip(reason)
    domain = ros_harness.claim_domain_id()
    ros_harness.set_loopback_env(domain)
    import rclpy

    rclpy.init()
    yield {"domain_id": domain, "jax_cache": str(tmp_path_factory.mktemp("jax_cache"))}
    rclpy.try_shutdown()


@pytest.fixture(scope="module")
def probe(ros_graph, request):
    p = ros_harness.Probe(f"probe_{request.module.__name__.split('.')[-1]}")
    yield p
    p.close()
