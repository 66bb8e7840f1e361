"""Message packages that some tests read and that are not among the PyPI wheels this repository installs.

``vision_msgs`` (``Detection2DArray``: config/robot_adapters.yaml's detector, ``person_seen``) is an exec_depend in
package.xml, so ``rosdep install`` brings it in a ROS workspace. Where it is not installed, a test that needs its
classes or its ``.msg`` files skips (``needs_vision_msgs``), and a test over config/robot_adapters.yaml drops the
detector's adapter (``robot_adapters_file``): that modality is then fed as ``CategoricalObservation`` and the rest
(Odometry, Imu, JointState, LaserScan) is tested as before.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

VISION_MSGS = importlib.util.find_spec("vision_msgs") is not None
VISION_MSGS_REASON = ("vision_msgs is not installed: it is not among the PyPI wheels (requirements/ros-kilted.txt); "
                      "`rosdep install` brings it (package.xml exec_depend)")
needs_vision_msgs = pytest.mark.skipif(not VISION_MSGS, reason=VISION_MSGS_REASON)

ROBOT_ADAPTERS = Path("config") / "robot_adapters.yaml"
DETECTOR = "person_seen"  # config/robot_adapters.yaml's vision_msgs/msg/Detection2DArray adapter


def robot_adapters(repo_root: Path) -> dict:
    """config/robot_adapters.yaml's ``adapters`` mapping, without the detector's where vision_msgs is missing."""
    adapters = yaml.safe_load((repo_root / ROBOT_ADAPTERS).read_text())["/**"]["ros__parameters"]["adapters"]
    if not VISION_MSGS:
        assert adapters.pop(DETECTOR)["type"] == "vision_msgs/msg/Detection2DArray"
    return adapters


def robot_adapters_file(repo_root: Path, folder: Path) -> Path:
    """config/robot_adapters.yaml itself, or where vision_msgs is missing a copy in ``folder`` without the
    detector's adapter (its other sections, ``controls``, kept)."""
    if VISION_MSGS:
        return repo_root / ROBOT_ADAPTERS
    params = yaml.safe_load((repo_root / ROBOT_ADAPTERS).read_text())["/**"]["ros__parameters"]
    params["adapters"] = robot_adapters(repo_root)
    out = folder / "robot_adapters_without_detector.yaml"
    out.write_text(yaml.safe_dump({"/**": {"ros__parameters": params}}))
    return out
