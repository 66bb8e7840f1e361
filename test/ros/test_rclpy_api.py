"""The table of rclpy / rcl_interfaces APIs the ROS layer uses (lab/rclpy_api.py) is complete,
true on the installed distro, and, where rclpy's and rcl_interfaces' git histories are at hand
(RCLPY_GIT_DIR, RCL_INTERFACES_GIT_DIR), true for Humble, Iron and Jazzy."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from ros_harness import REPO_ROOT, ros_unavailable_reason

pytestmark = [pytest.mark.ros]

ROS_FILES = sorted((REPO_ROOT / "bayes_infer_ros" / "ros").glob("*.py"))


@pytest.fixture(scope="module")
def api():
    reason = ros_unavailable_reason()
    if reason:
        pytest.skip(reason)
    from lab import rclpy_api

    return rclpy_api


def test_every_use_in_the_ros_layer_is_in_the_table(api):
    uses = api.collect_uses(ROS_FILES)
    assert "rclpy.node.Node.create_timer(clock)" in uses  # the scan sees keyword uses
    missing = {u: sorted(f) for u, f in uses.items() if not api.covered(u, api.API)}
    assert not missing, f"add these to rclpy_api.API with their first distro: {missing}"


def test_the_scan_finds_a_new_use(api, tmp_path):
    src = tmp_path / "x.py"
    src.write_text("from rclpy.node import Node\n\nclass N(Node):\n    def f(self):\n"
                   "        self.get_publisher_names_and_types_by_node('n', '/')\n        self.create_rate(5.0, clock=None)\n")
    uses = api.collect_uses([src])
    assert not api.covered("rclpy.node.Node.get_publisher_names_and_types_by_node", api.API)
    assert "rclpy.node.Node.get_publisher_names_and_types_by_node" in uses
    assert "rclpy.node.Node.create_rate(clock)" in uses


def test_every_entry_exists_on_the_installed_distro(api):
    installed = api.installed_distro()
    due = [e for e, first in api.API.items() if api.DISTROS.index(first) <= api.DISTROS.index(installed)]
    problems = [p for p in map(api.resolve, due) if p]
    assert not problems, f"on {installed}: {problems}"


def test_only_feature_detected_entries_are_newer_than_humble(api):
    newer = {e for e, first in api.API.items() if first != "humble"}
    assert newer == set(api.FEATURE_DETECTED)
    for entry, module in api.FEATURE_DETECTED.items():
        attr = api._split(entry)[0].rsplit(".", 1)[1]
        for path in ROS_FILES:
            text = path.read_text()
            direct = [line for line in text.splitlines() if re.search(rf"\.{attr}\(", line)]
            if path.name == module:
                assert f'getattr(node, "{attr}"' in text, f"{module} must feature-detect {attr}"
                continue
            assert not direct, f"{path.name} calls {attr} (newer than Humble) directly: {direct}"


def test_the_git_check_catches_a_wrong_first_distro(api, monkeypatch):
    git = os.environ.get("RCLPY_GIT_DIR")
    if not git or not Path(git).is_dir():
        pytest.skip("RCLPY_GIT_DIR (a git dir of ros2/rclpy with branches humble, iron, jazzy) not set")
    monkeypatch.setitem(api.API, "rclpy.node.Node.add_post_set_parameters_callback", "humble")
    problems = api.check_against_git(git, None)
    assert problems == ["rclpy.node.Node.add_post_set_parameters_callback: table says first in humble, "
                        "but humble lacks it"]


def test_first_distros_match_the_sources(api):
    rclpy_git = os.environ.get("RCLPY_GIT_DIR")
    rcl_interfaces_git = os.environ.get("RCL_INTERFACES_GIT_DIR")
    if not (rclpy_git and Path(rclpy_git).is_dir() and rcl_interfaces_git and Path(rcl_interfaces_git).is_dir()):
        pytest.skip("RCLPY_GIT_DIR / RCL_INTERFACES_GIT_DIR (git dirs of ros2/rclpy, ros2/rcl_interfaces) not set")
    assert api.check_against_git(rclpy_git, rcl_interfaces_git) == []
