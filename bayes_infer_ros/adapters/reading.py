"""A sensor message -> a level of its modality (pure: works on rclpy messages and rosbags objects alike).

:func:`resolve_field` follows a dotted path, :func:`reduce_values` turns a sequence into one number,
:func:`bin_level` and :func:`mapped_level` turn a value into a level, :func:`read_level` does all of it and
never raises: a message it cannot use gives a :class:`Reading` with the reason, which the node counts as
``rejected.<reason>`` like any other refused input:

- ``missing_field``: the path does not resolve, or ``index_range`` reaches past the sequence (or selects nothing);
- ``non_finite``: the value (after the reduction) is NaN (or inf outside finite bins: ``out_of_bins``);
- ``out_of_bins``: a number outside ``[bins[0], bins[-1]]``;
- ``unknown_value``: a value that no entry of ``levels`` lists (or of the wrong type).

:func:`check_template` checks a spec against a default message of its type at configure.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from .config import AdapterConfigError, AdapterSpec

_MISSING = object()


@dataclass(frozen=True)
class Reading:
    """``level`` (an index of the modality's levels) or ``reason``/``detail`` when the message is refused."""

    level: Optional[int]
    reason: Optional[str] = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.reason is None


def resolve_field(msg: Any, path: str) -> Any:
    """``msg.a.b.c`` for ``path == "a.b.c"``; a sentinel ``_MISSING`` when a step does not exist."""
    value = msg
    for part in path.split("."):
        value = getattr(value, part, _MISSING)
        if value is _MISSING:
            return _MISSING
    return value


def is_sequence(value: Any) -> bool:
    return not isinstance(value, (str, bytes)) and hasattr(value, "__len__") and hasattr(value, "__getitem__")


def reduce_values(values: Any, reduction: str, index_range: Optional[tuple[int, int]]) -> Optional[float]:
    """min / max / mean of ``values[first:end]`` (all when ``index_range`` is None), in float64; None when the
    range reaches past the sequence or selects nothing. NaN entries make the result NaN (refused)."""
    array = np.asarray(values, dtype=np.float64).ravel()
    if index_range is not None:
        first, end = index_range
        if end > array.size:
            return None
        array = array[first:end]
    if array.size == 0:
        return None
    if np.isnan(array).any():
        return float("nan")
    return float({"min": np.min, "max": np.max, "mean": np.mean}[reduction](array))


def bin_level(value: float, edges: tuple[float, ...], levels: tuple[int, ...]) -> Optional[int]:
    """The level of the interval ``[e_k, e_k+1)`` holding ``value`` (the last interval closed); None outside."""
    if math.isnan(value) or value < edges[0] or value > edges[-1]:
        return None
    k = min(bisect.bisect_right(edges, value) - 1, len(levels) - 1)
    return levels[k]


def _same(a: Any, b: Any) -> bool:
    # True == 1 in Python: a boolean level value only matches a boolean field, and a number only a number
    return isinstance(a, bool) == isinstance(b, bool) and isinstance(a, str) == isinstance(b, str) and a == b


def mapped_level(value: Any, level_of: tuple[tuple[Any, int], ...]) -> Optional[int]:
    """The level whose ``levels`` entry lists ``value``; None when none does."""
    if isinstance(value, (np.generic,)):
        value = value.item()
    for candidate, level in level_of:
        if _same(candidate, value):
            return level
    return None


def read_level(msg: Any, spec: AdapterSpec) -> Reading:
    """The level ``spec`` reads from ``msg`` (see the module docstring). Never raises."""
    value = resolve_field(msg, spec.field)
    if value is _MISSING:
        return Reading(None, "missing_field", f"{spec.type} has no field {spec.field!r}")
    if spec.reduction is not None:
        if not is_sequence(value):
            return Reading(None, "missing_field", f"{spec.field} is not a sequence")
        reduced = reduce_values(value, spec.reduction, spec.index_range)
        if reduced is None:
            return Reading(None, "missing_field", f"{spec.field} has {len(value)} entries; index_range "
                                                  f"{list(spec.index_range or (0, 0))} selects none or reaches past it")
        value = reduced
    if spec.bins is not None:
        if isinstance(value, (bool, str)) or not isinstance(value, (int, float, np.number)):
            return Reading(None, "unknown_value", f"{spec.field} = {value!r} is not a number")
        value = float(value)
        if math.isnan(value):
            return Reading(None, "non_finite", f"{spec.field} is NaN")
        level = bin_level(value, spec.bins, spec.bin_levels)
        if level is None:
            return Reading(None, "out_of_bins", f"{spec.field} = {value:g} is outside the bins "
                                                f"[{spec.bins[0]:g}, {spec.bins[-1]:g}]")
        return Reading(level)
    if isinstance(value, float) and math.isnan(value):
        return Reading(None, "non_finite", f"{spec.field} is NaN")
    level = mapped_level(value, spec.level_of)
    if level is None:
        return Reading(None, "unknown_value", f"{spec.field} = {value!r} is not among the values of levels "
                                              f"{sorted({repr(v) for v, _ in spec.level_of})}")
    return Reading(level)


def check_template(spec: AdapterSpec, template: Any) -> None:
    """Check ``spec`` against ``template``, a default message of ``spec.type`` (its fields hold their types'
    defaults): the field exists; a sequence has a reduction and numbers; bins read a number; levels' values have
    the field's type. AdapterConfigError names the parameter."""
    param = spec.param
    value = resolve_field(template, spec.field)
    if value is _MISSING:
        raise AdapterConfigError(f"{param}.field: {spec.type} has no field {spec.field!r}")
    if is_sequence(value):
        if spec.reduction is None:
            raise AdapterConfigError(f"{param}.reduction: {spec.field} is a sequence: set min, max or mean")
        kind = np.asarray(value).dtype.kind if len(value) else _sequence_kind(value)
        if kind not in "iuf":
            raise AdapterConfigError(f"{param}.field: {spec.field} is not a sequence of numbers")
        return
    if spec.reduction is not None:
        raise AdapterConfigError(f"{param}.reduction: {spec.field} is a single value, not a sequence")
    if not isinstance(value, (bool, int, float, str)):
        raise AdapterConfigError(f"{param}.field: {spec.field} is a message ({type(value).__name__}); name one of "
                                 "its number, boolean or string fields")
    if spec.bins is not None:
        if isinstance(value, (bool, str)):
            raise AdapterConfigError(f"{param}.bins: {spec.field} is a {type(value).__name__}, not a number; "
                                     "use levels")
        return
    for candidate, _ in spec.level_of:
        if _kind(candidate) != _kind(value) and not (_kind(value) == "number" and _kind(candidate) == "integer"):
            raise AdapterConfigError(f"{param}.levels: {candidate!r} is a {type(candidate).__name__} but "
                                     f"{spec.field} is a {type(value).__name__}")


def _kind(value: Any) -> str:
    """boolean, string, integer or number (a float field's levels may be given as integers)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, str):
        return "string"
    return "integer" if isinstance(value, int) else "number"


def _sequence_kind(value: Any) -> str:
    """dtype kind of an empty sequence field (an rclpy array.array has a typecode; a list says nothing)."""
    typecode = getattr(value, "typecode", None)
    if typecode is None:
        return "f"
    return "f" if typecode in "fd" else "i"
