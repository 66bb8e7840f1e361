"""A sensor message -> an observation of its modality (pure: works on rclpy messages and rosbags objects alike).

:func:`read_level` follows the field path (``paths.py``), keeps the entries whose ``key_field`` equals ``key``,
reduces many values to one (REP 117 for a LaserScan's ranges and a Range), and turns the value into a level
(``bins`` or ``levels``) and, with a declared noise (``sigma``, ``confusion``), into probabilities over the levels.
It never raises: a message it cannot use gives a :class:`Reading` with the reason, which the node counts as
``rejected.<reason>`` like any other refused input:

- ``missing_field``: the path does not resolve (a field, or an index past the end of a sequence), or ``key_field``
  and ``field`` have different numbers of entries, or ``index_range`` reaches past the sequence;
- ``no_match``: nothing is selected (no entry has the key, an empty sequence) and ``empty_value`` is not set; or
  several entries have the key and there is no reduction;
- ``non_finite``: the value is NaN (a LaserScan sector: every beam NaN);
- ``out_of_limits``: a Range's finite range outside ``[min_range, max_range]``; a LaserScan sector with no beam in
  ``[range_min, range_max]`` (REP 117: those beams are invalid);
- ``out_of_bins``: a number outside ``[bins[0], bins[-1]]``;
- ``unknown_value``: a value that no entry of ``levels`` lists (or of the wrong type).

REP 117: NaN beams are skipped, finite beams outside ``[range_min, range_max]`` are skipped, ``+inf`` ("no return
within range") reads as +inf, beyond ``range_max``, and ``-inf`` ("too close") as -inf, below ``range_min``: bins whose
outer edges are ``.inf`` read them.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from .config import AdapterSpec
from .evidence import bin_probabilities, level_probabilities
from .paths import Missing, is_message, message_fields, parse_path, resolve


@dataclass(frozen=True)
class Reading:
    """``level`` (an index of the modality's levels; one-hot) or ``probabilities`` over the levels (soft evidence,
    then ``level`` is the most likely one), or ``reason``/``detail`` when the message is refused."""

    level: Optional[int]
    reason: Optional[str] = None
    detail: str = ""
    probabilities: Optional[tuple[float, ...]] = None

    @property
    def ok(self) -> bool:
        return self.reason is None


class Refused(Exception):
    """A message the adapter cannot read: ``reason`` (a diagnostics counter name) and the detail."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def reduce_values(values: Any, reduction: str, index_range: Optional[tuple[int, int]]) -> Optional[float]:
    """min / max / mean / norm of ``values[first:end]`` (all when ``index_range`` is None), in float64; None when
    the range reaches past the sequence or selects nothing. NaN entries make the result NaN (refused)."""
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
    return _reduce(array, reduction)


def _reduce(array: np.ndarray, reduction: str) -> float:
    if reduction == "norm":
        return float(np.sqrt(np.sum(np.square(array)))) if np.isfinite(array).all() else float("inf")
    return float({"min": np.min, "max": np.max, "mean": np.mean}[reduction](array))


def vector_norm(msg: Any) -> float:
    """The Euclidean norm of a message of numbers (geometry_msgs Vector3: x, y, z)."""
    return float(np.sqrt(sum(float(getattr(msg, name)) ** 2 for name in message_fields(msg))))


def beam_angles(scan: Any, count: int) -> np.ndarray:
    """(count,) the angle of each beam of a LaserScan: angle_min + i * angle_increment, float64."""
    return float(scan.angle_min) + np.arange(count, dtype=np.float64) * float(scan.angle_increment)


def in_sector(angles: np.ndarray, sector: tuple[float, float]) -> np.ndarray:
    """Which angles lie in [from, to] (radians), comparing modulo 2 pi (a sector may cross +-pi)."""
    start, end = sector
    offset = np.mod(angles - start, 2 * np.pi)
    return offset <= (end - start) + 1e-9


def scan_value(scan: Any, spec: AdapterSpec) -> float:
    """A LaserScan's ranges (or intensities) in the sector, reduced (REP 117 for ranges, see the module)."""
    beams = np.asarray(getattr(scan, spec.scan_beams), dtype=np.float64).ravel()
    if spec.index_range is not None:
        first, end = spec.index_range
        if end > beams.size:
            raise Refused("missing_field", f"{spec.field} has {beams.size} entries; index_range "
                                           f"{list(spec.index_range)} reaches past it")
        beams = beams[first:end]
    elif spec.angle_range is not None:
        beams = beams[in_sector(beam_angles(scan, beams.size), spec.angle_range)]
    if beams.size == 0:
        raise Refused("missing_field", f"{spec.field}: no beam in the sector ({beams.size} beams)")
    if spec.rep117:
        finite = np.isfinite(beams)
        low, high = float(scan.range_min), float(scan.range_max)
        usable = (finite & (beams >= low) & (beams <= high)) | np.isinf(beams)
        if not usable.any():
            if np.isnan(beams).all():
                raise Refused("non_finite", f"every beam of {spec.field} in the sector is NaN")
            raise Refused("out_of_limits", f"no beam of {spec.field} in the sector is within [range_min, "
                                           f"range_max] = [{low:g}, {high:g}] (REP 117)")
        beams = beams[usable]
    elif np.isnan(beams).any():
        raise Refused("non_finite", f"{spec.field} has NaN entries")
    if spec.reduction == "mean" and np.isposinf(beams).any() and np.isneginf(beams).any():
        raise Refused("non_finite", f"the mean of {spec.field} has +inf and -inf beams")
    return _reduce(beams, spec.reduction)


def select_value(msg: Any, spec: AdapterSpec) -> Any:
    """The one value ``spec`` reads from ``msg`` (a number for bins); Refused when there is none."""
    if spec.scan_beams and spec.key_field is None:
        return scan_value(msg, spec)
    try:
        got = resolve(msg, parse_path(spec.field))
        keys = resolve(msg, parse_path(spec.key_field)) if spec.key_field is not None else None
    except Missing as exc:
        raise Refused("missing_field", f"{spec.type}: {exc}") from None
    if not got.many:
        value = got.value
        if spec.reduction == "norm" and is_message(value):
            return vector_norm(value)
        if spec.rep117 == "range":
            return range_value(msg, value)
        return value
    values = got.values
    if keys is not None:
        if len(keys.values) != len(values):
            raise Refused("missing_field", f"{spec.field} has {len(values)} entries but {spec.key_field} has "
                                           f"{len(keys.values)}")
        chosen = [k for k, key in enumerate(keys.values) if _same(key, spec.key)]
        values = values[chosen] if isinstance(values, np.ndarray) else [values[k] for k in chosen]
    if spec.reduction is None:
        if len(values) != 1:
            raise Refused("no_match", f"{len(values)} entries of {spec.field} have {spec.key_field} = {spec.key!r}"
                                      " (expected one; a reduction reads several)")
        value = values[0]
        return value.item() if isinstance(value, np.generic) else value
    if not isinstance(values, np.ndarray):
        raise Refused("unknown_value", f"{spec.field} holds {type(values[0]).__name__}s, not numbers")
    if spec.index_range is not None:
        if spec.index_range[1] > values.size:
            raise Refused("missing_field", f"{spec.field} has {values.size} entries; index_range "
                                           f"{list(spec.index_range)} reaches past it")
        values = values[spec.index_range[0]:spec.index_range[1]]
    if values.size == 0:
        if spec.empty_value is not None:
            return spec.empty_value
        what = f"with {spec.key_field} = {spec.key!r}" if spec.key_field is not None else "(empty)"
        raise Refused("no_match", f"no entry of {spec.field} {what}")
    if np.isnan(values).any():
        raise Refused("non_finite", f"{spec.field} has NaN entries")
    return _reduce(values, spec.reduction)


def range_value(msg: Any, value: Any) -> float:
    """A Range's ``range`` by REP 117: +-inf as they are, a finite value outside [min_range, max_range] refused."""
    value = float(value)
    if math.isfinite(value) and not float(msg.min_range) <= value <= float(msg.max_range):
        raise Refused("out_of_limits", f"range {value:g} is outside [min_range, max_range] = "
                                       f"[{float(msg.min_range):g}, {float(msg.max_range):g}] (REP 117)")
    return value


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
    """The observation ``spec`` reads from ``msg`` (see the module docstring). Never raises."""
    try:
        value = select_value(msg, spec)
    except Refused as exc:
        return Reading(None, exc.reason, exc.detail)
    except (AttributeError, TypeError, ValueError) as exc:  # a message unlike its type's definition
        return Reading(None, "missing_field", f"{type(exc).__name__}: {exc}")
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
        if spec.sigma is not None:
            probabilities = bin_probabilities(value, spec.bins, spec.bin_levels, spec.sigma, spec.num_levels)
            return Reading(int(np.argmax(probabilities)), probabilities=probabilities)
        return _with_confusion(level, spec)
    if isinstance(value, float) and math.isnan(value):
        return Reading(None, "non_finite", f"{spec.field} is NaN")
    level = mapped_level(value, spec.level_of)
    if level is None:
        return Reading(None, "unknown_value", f"{spec.field} = {value!r} is not among the values of levels "
                                              f"{sorted({repr(v) for v, _ in spec.level_of})}")
    return _with_confusion(level, spec)


def _with_confusion(level: int, spec: AdapterSpec) -> Reading:
    row = level_probabilities(level, spec.confusion)
    return Reading(level) if row is None else Reading(level, probabilities=row)
