"""The rosbags typestore for this package's bags: ROS 2 Kilted plus our own interfaces.

Pure Python (no rclpy). The custom types are registered from the package's own ``.msg`` files, so the
type hashes written into a bag are the ones rosidl computes for the colcon-built interfaces. A bag recorded
before a field was added (``CategoricalObservation.label``) keeps the definition it was written with:
:func:`recorded_decoder` reads it, :func:`current_cdr` turns it into the current definition's CDR (the replay).
"""
from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, Callable, Optional

from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from .convert import default_value

PACKAGE = "bayes_infer_ros"
# Order matters only for readability: all texts are registered in one call.
CUSTOM_MESSAGES = ("CategoricalObservation", "Belief", "Beliefs", "Controls", "Policy", "BeliefEvent")

OBSERVATION_TYPE = f"{PACKAGE}/msg/CategoricalObservation"
BELIEF_TYPE = f"{PACKAGE}/msg/Belief"
BELIEFS_TYPE = f"{PACKAGE}/msg/Beliefs"
CONTROLS_TYPE = f"{PACKAGE}/msg/Controls"
POLICY_TYPE = f"{PACKAGE}/msg/Policy"
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


def register_installed(store: Typestore, typename: str) -> None:
    """Register ``typename`` (``pkg/msg/Name``) and the rest of its package's messages in ``store`` from the
    package's installed ``.msg`` files (``<prefix>/share/<pkg>/msg`` on AMENT_PREFIX_PATH), unless the store knows
    it. rosbags' stores hold the ROS 2 core packages; this reaches others (vision_msgs). FileNotFoundError when no
    prefix has it."""
    if typename in store.types:
        return
    package = typename.split("/")[0]
    prefixes = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    for prefix in prefixes:
        folder = Path(prefix) / "share" / package / "msg"
        if (folder / f"{typename.split('/')[-1]}.msg").is_file():
            types = {}
            for path in sorted(folder.glob("*.msg")):
                types.update(get_types_from_msg(path.read_text(), f"{package}/msg/{path.stem}"))
            store.register(types)
            return
    raise FileNotFoundError(f"{typename}: no {package}/msg/*.msg under AMENT_PREFIX_PATH ({', '.join(prefixes)})")


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


def _fields_text(definition: str) -> str:
    """The first message of a (rosbag2, concatenated) definition, without comments and blank lines."""
    first = definition.split("\n====")[0]
    lines = (line.split("#")[0].strip() for line in first.splitlines())
    return "\n".join(line for line in lines if line)


@functools.lru_cache(maxsize=16)
def _recorded_typestore(msgtype: str, fields_text: str) -> Typestore:
    store = get_typestore(Stores.ROS2_KILTED)
    store.register(get_types_from_msg(fields_text, msgtype))
    return store


def recorded_decoder(msgtype: str, definition: str) -> Optional[Callable[[bytes], Any]]:
    """For one of this package's types recorded with another definition than the current ``.msg`` file (a field
    added since): raw CDR -> a rosbags object of the recorded definition. None when the definitions agree (or the
    type is not ours)."""
    name = msgtype.rsplit("/", 1)[-1]
    if not msgtype.startswith(f"{PACKAGE}/") or name not in CUSTOM_MESSAGES or not definition:
        return None
    recorded = _fields_text(definition)
    if recorded == _fields_text((find_msg_dir() / f"{name}.msg").read_text()):
        return None
    store = _recorded_typestore(msgtype, recorded)
    return lambda raw: store.deserialize_cdr(raw, msgtype)


def current_cdr(msgtype: str, definition: str) -> Callable[[bytes], bytes]:
    """raw CDR of ``msgtype`` as recorded with ``definition`` -> raw CDR of the current definition: fields added
    since get their defaults (0, '', empty), fields that are gone are dropped. Identity when they agree."""
    decode = recorded_decoder(msgtype, definition)
    if decode is None:
        return lambda raw: raw
    store = make_typestore()
    _, fields = store.fielddefs[msgtype]

    def upgrade(raw: bytes) -> bytes:
        old = decode(raw)
        new = {name: getattr(old, name) if hasattr(old, name) else default_value(store, desc) for name, desc in fields}
        return bytes(store.serialize_cdr(store.types[msgtype](**new), msgtype))

    return upgrade

