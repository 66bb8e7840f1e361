"""Between rosbags' message objects and the colcon-generated (rclpy) message classes, without importing rclpy.

Decoded messages are compared, never bytes: ``rclpy.serialization.serialize_message`` may append alignment
padding that rosbags rejects, so the recorder converts a received rclpy message field by field into a rosbags
object and lets rosbags serialise it.
"""
from __future__ import annotations

import array
import importlib
from typing import Any

import numpy as np
from rosbags.typesys.base import Nodetype

# rosbags base type name -> numpy dtype of a primitive array/sequence field
_NUMPY = {
    "bool": np.bool_, "byte": np.uint8, "char": np.uint8, "int8": np.int8, "uint8": np.uint8,
    "int16": np.int16, "uint16": np.uint16, "int32": np.int32, "uint32": np.uint32,
    "int64": np.int64, "uint64": np.uint64, "float32": np.float32, "float64": np.float64,
}


def message_class(typename: str) -> type:
    """The generated Python class of ``pkg/msg/Name`` (or ``pkg/Name``), imported the way ros2cli does."""
    parts = typename.split("/")
    if len(parts) == 2:
        parts = [parts[0], "msg", parts[1]]
    if len(parts) != 3:
        raise ValueError(f"not a ROS 2 message type name: {typename!r}")
    pkg, kind, name = parts
    module = importlib.import_module(f"{pkg}.{kind}")
    try:
        return getattr(module, name)
    except AttributeError:
        raise ImportError(f"{pkg}.{kind} has no {name}") from None


def typename_of(cls_or_msg: Any) -> str:
    """``pkg/msg/Name`` of a generated class or instance."""
    cls = cls_or_msg if isinstance(cls_or_msg, type) else type(cls_or_msg)
    pkg, kind = cls.__module__.split(".")[:2]
    return f"{pkg}/{kind}/{cls.__name__}"


def to_rosbags(msg: Any, typename: str, store) -> Any:
    """Convert a generated-class message (rclpy) into the equivalent rosbags object of ``typename``."""
    _, fields = store.fielddefs[typename]
    kwargs = {}
    for name, desc in fields:
        kwargs[name] = _field_to_rosbags(getattr(msg, name), desc, store)
    return store.types[typename](**kwargs)


def _field_to_rosbags(value: Any, desc, store) -> Any:
    kind, spec = desc
    if kind == Nodetype.NAME:
        return to_rosbags(value, spec, store)
    if kind == Nodetype.BASE:
        base = spec[0]
        if base in ("string", "wstring"):
            return str(value)
        if base in ("float32", "float64"):
            return float(value)
        if base == "bool":
            return bool(value)
        return int(value[0]) if isinstance(value, (bytes, bytearray)) else int(value)
    # ARRAY or SEQUENCE
    (sub_kind, sub_spec), _length = spec
    if sub_kind == Nodetype.BASE and sub_spec[0] in _NUMPY:
        dtype = _NUMPY[sub_spec[0]]
        if isinstance(value, (bytes, bytearray)):
            return np.frombuffer(bytes(value), dtype=dtype).copy()
        if isinstance(value, array.array):
            return np.frombuffer(value.tobytes(), dtype=dtype).copy() if value.itemsize == np.dtype(dtype).itemsize \
                else np.asarray(value.tolist(), dtype=dtype)
        return np.asarray(list(value) if not isinstance(value, np.ndarray) else value, dtype=dtype)
    return [_field_to_rosbags(v, (sub_kind, sub_spec), store) for v in value]


def default_message(store: Any, typename: str) -> Any:
    """A rosbags message of ``typename`` with every field at its type's default (0, '', false, empty)."""
    _, fields = store.fielddefs[typename]
    return store.types[typename](**{name: default_value(store, desc) for name, desc in fields})


def default_value(store: Any, desc: Any) -> Any:
    """The default of one field (``desc``: its rosbags field description)."""
    kind, spec = desc
    if kind == Nodetype.NAME:
        return default_message(store, spec)
    if kind == Nodetype.BASE:
        base = spec[0]
        return "" if base in ("string", "wstring") else False if base == "bool" else \
            0.0 if base.startswith("float") else 0
    (sub_kind, sub_spec), length = spec
    if sub_kind == Nodetype.BASE and sub_spec[0] in _NUMPY:
        return np.zeros(length if kind == Nodetype.ARRAY else 0, dtype=_NUMPY[sub_spec[0]])
    return [default_value(store, (sub_kind, sub_spec)) for _ in range(length if kind == Nodetype.ARRAY else 0)]
