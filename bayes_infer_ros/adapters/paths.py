"""Field paths of the sensor adapters (pure: works on rclpy messages and rosbags objects alike).

A path is dotted steps, each a field name, optionally followed by an index:

- ``voltage``, ``header.frame_id``, ``twist.twist.linear``: a field;
- ``position[2]``, ``detections[0].results[0].hypothesis.score``: entry i of a sequence;
- ``detections[].results[].hypothesis.score``: every entry of a sequence (the values of all of them, in order).

A path that ends in a sequence of numbers or strings (``ranges``, ``name``) stands for every entry of it, as if it
ended in ``[]``. A path with any ``[]`` step, or that ends in such a sequence, gives *many* values; otherwise one.

A path is exact: no spaces around it or its steps, ASCII digits in an index. :func:`resolve` takes a cap on the
entries it reads (``max_entries``): a sequence it reads entry by entry (``[]``, or the sequence a path ends in) with
more entries is refused before any entry is read (:class:`TooLarge`); an index reads one entry of a sequence of any
length.
"""
from __future__ import annotations

import array
import functools
import re
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

ALL = -1  # Step.index of ``name[]``
# The most entries of a sequence an adapter reads entry by entry in one message (a scan's beams, a JointState's
# names, the detections of a Detection2DArray), and the most values one path gathers: a message past it is refused
# (``too_large``) before any entry is read, so that reading costs at most this much work whatever the sender sends.
# An index (``ranges[i]``) must be below it. 2^16: a 2D lidar sends a few thousand beams, a JointState tens of joints.
MAX_ENTRIES = 65_536
_STEP = re.compile(r"([A-Za-z][A-Za-z0-9_]*)(?:\[([0-9]*)\])?")


class PathError(ValueError):
    """A path that is not dotted steps ``name``, ``name[i]`` or ``name[]``."""


@dataclass(frozen=True)
class Step:
    """One step of a path: a field ``name`` and ``index`` (None: the field itself; ``ALL``: every entry; i >= 0:
    entry i)."""

    name: str
    index: Optional[int] = None

    def __str__(self) -> str:
        return self.name if self.index is None else f"{self.name}[{'' if self.index == ALL else self.index}]"


@functools.lru_cache(maxsize=256)
def parse_path(text: str) -> tuple[Step, ...]:
    """``"detections[].results[0].hypothesis.score"`` -> its steps; PathError when it is not a path (spaces
    around it or in it included: a path is exact)."""
    steps = []
    for part in str(text).split("."):
        match = _STEP.fullmatch(part)
        if match is None:
            raise PathError(f"expected a dotted path of field names, each optionally with [i] or [] (such as "
                            f"'voltage', 'position[2]' or 'detections[].results[].hypothesis.score'), got {text!r}")
        name, index = match.group(1), match.group(2)
        steps.append(Step(name, None if index is None else ALL if index == "" else int(index)))
    return tuple(steps)


def path_text(steps: tuple[Step, ...]) -> str:
    return ".".join(str(s) for s in steps)


def is_sequence(value: Any) -> bool:
    """A ROS sequence or array field's value (list, tuple, array.array, numpy array), not a string."""
    return not isinstance(value, (str, bytes)) and hasattr(value, "__len__") and hasattr(value, "__getitem__")


def is_message(value: Any) -> bool:
    """A message (rclpy, rosbags or a test double): an object with fields, not a plain value or a sequence."""
    return not isinstance(value, (bool, int, float, str, bytes, np.generic)) and not is_sequence(value)


def message_fields(msg: Any) -> list[str]:
    """The field names of a message object (rclpy: get_fields_and_field_types; rosbags: dataclass fields)."""
    fields = getattr(msg, "get_fields_and_field_types", None)
    if fields is not None:
        return list(fields())
    dataclass_fields = getattr(msg, "__dataclass_fields__", None)
    if dataclass_fields is not None:
        return [name for name in dataclass_fields if not name.startswith("_")]
    return [name for name in vars(msg) if not name.startswith("_")]


class Missing(Exception):
    """A path step that does not resolve in a message (the reason is the message)."""


class TooLarge(Exception):
    """A sequence with more entries than the reader's cap (the reason is the message)."""


@dataclass(frozen=True)
class Resolved:
    """The values a path gives in one message: ``values`` (a list, or a float64 array when the path ends in a
    sequence of numbers) when ``many``, else the one ``value``."""

    many: bool
    values: Any = None
    value: Any = None


def resolve(msg: Any, steps: tuple[Step, ...], max_entries: Optional[int] = None) -> Resolved:
    """Follow ``steps`` in ``msg``. Raises Missing (with the reason) when a field or an entry does not exist, and
    TooLarge when a sequence read entry by entry, or all the values gathered, exceed ``max_entries`` (None: no cap).
    Reads the entries the path names: one for ``[i]``, every one for ``[]`` and a final sequence."""
    current: list = [msg]
    many = False
    for k, step in enumerate(steps):
        following: list = []
        final = k == len(steps) - 1
        for value in current:
            field = getattr(value, step.name, _ABSENT)
            if field is _ABSENT:
                raise Missing(f"{path_text(steps[:k + 1])}: no field {step.name!r}")
            if step.index is None:
                following.append(field)
            elif not is_sequence(field):
                raise Missing(f"{path_text(steps[:k + 1])}: {step.name} is not a sequence")
            elif step.index == ALL:
                _check_size(field, max_entries, steps[:k + 1])
                if final and not many and len(current) == 1:  # one sequence of values: converted at once
                    return Resolved(True, values=sequence_values(field))
                many = True
                following.extend(_entries(field))
                _check_size(following, max_entries, steps[:k + 1])
            elif step.index < len(field):
                following.append(field[step.index])
            else:
                raise Missing(f"{path_text(steps[:k + 1])}: {step.name} has {len(field)} entries")
        current = following
    if not many and is_sequence(current[0]):
        _check_size(current[0], max_entries, steps)
        return Resolved(True, values=sequence_values(current[0]))
    return Resolved(True, values=_as_values(current)) if many else Resolved(False, value=current[0])


def _check_size(sequence: Any, max_entries: Optional[int], steps: tuple[Step, ...]) -> None:
    if max_entries is not None and len(sequence) > max_entries:
        raise TooLarge(f"{path_text(steps)} has {len(sequence)} entries, more than the cap of {max_entries}")


# array.array type codes of numbers (rclpy's numeric sequences; 'u'/'w' are characters)
_NUMBER_CODES = frozenset("bBhHiIlLqQfd")


def sequence_values(sequence: Any) -> Any:
    """The entries of one sequence field as :class:`Resolved` holds them: a float64 array for numbers (numpy and
    array.array at C speed, no entry converted on its own), else a list."""
    if isinstance(sequence, np.ndarray) and sequence.dtype.kind in "fiu":
        return sequence.astype(np.float64).ravel()
    if isinstance(sequence, array.array) and sequence.typecode in _NUMBER_CODES:
        return np.asarray(sequence, dtype=np.float64)
    return _as_values(_entries(sequence))


def _entries(sequence: Any) -> list:
    return sequence.tolist() if isinstance(sequence, np.ndarray) else list(sequence)


def _as_values(values: list) -> Any:
    """A float64 array when every value is a number (not a bool), else the list."""
    if values and all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
                      for v in values):
        return np.asarray(values, dtype=np.float64)
    if not values:
        return np.zeros(0, dtype=np.float64)
    return [v.item() if isinstance(v, np.generic) else v for v in values]


_ABSENT = object()
