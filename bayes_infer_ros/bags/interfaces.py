"""The rosbags typestore for this package's bags: ROS 2 Kilted plus our own interfaces.

Pure Python (no rclpy). The custom types are registered from the package's own ``.msg`` files, so the
type hashes written into a bag are the ones rosidl computes for the colcon-built interfaces.
"""
from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Optional

from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

PACKAGE = "bayes_infer_ros"
# Order matters only for readability: all texts are registered in one call.
CUSTOM_MESSAGES = ("CategoricalObservation", "Belief", "Beliefs", "Controls")

OBSERVATION_TYPE = f"{PACKAGE}/msg/CategoricalObservation"
BELIEF_TYPE = f"{PACKAGE}/msg/Belief"
BELIEFS_TYPE = f"{PACKAGE}/msg/Beliefs"
CONTROLS_TYPE = f"{PACKAGE}/msg/Controls"
INT32_MULTI_ARRAY_TYPE = "std_msgs/msg/Int32MultiArray"
CLOCK_TYPE = "rosgraph_msgs/msg/Clock"


def find_msg_dir() -> Path:
    """The folder holding this package's ``.msg`` files.

    Looked up in the source tree first (``<repo>/msg``, also reached through colcon's symlink install), then
    in the ament share folder (``<prefix>/share/bayes_infer_ros/msg``).
    """
    here = Path(__file__).resolve()
    candidates = [here.parents[2] / "msg"]
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if prefix:
            candidates.append(Path(prefix) / "share" / PACKAGE / "msg")
    for folder in candidates:
        if all((folder / f"{name}.msg").is_file() for name in CUSTOM_MESSAGES):
            return folder
    raise FileNotFoundError(
        f"cannot find {PACKAGE}'s .msg files; looked in: " + ", ".join(str(c) for c in candidates)
    )


@functools.lru_cache(maxsize=4)
def _typestore(msg_dir: str) -> Typestore:
    store = get_typestore(Stores.ROS2_KILTED)
    types = {}
    for name in CUSTOM_MESSAGES:
        text = (Path(msg_dir) / f"{name}.msg").read_text()
        types.update(get_types_from_msg(text, f"{PACKAGE}/msg/{name}"))
    store.register(types)
    return store


def make_typestore(msg_dir: Optional[os.PathLike] = None) -> Typestore:
    """A (cached) Kilted typestore with ``bayes_infer_ros/msg/*`` registered."""
    return _typestore(str(Path(msg_dir) if msg_dir is not None else find_msg_dir()))
