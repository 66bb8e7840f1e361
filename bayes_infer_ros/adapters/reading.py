"""A sensor message -> an observation of its modality (pure: works on rclpy messages and rosbags objects alike).

:func:`read_level` follows the field path (``paths.py``), keeps the entries whose ``key_field`` equals ``key``,
reduces many values to one (REP 117 for a LaserScan's ranges, one of its beams, and a Range), and turns the value
into a level (``bins`` or ``levels``) and, with a declared noise (``sigma``, ``confusion``), into probabilities over
the levels. It never raises: a message it cannot use gives a :class:`Reading` with the reason, which the node counts
as ``rejected.<reason>`` like any other refused input. :data:`REASONS` lists them.

REP 117 (a LaserScan's ``ranges``, a single beam ``ranges[i]``, a Range's ``range``): NaN is no reading (a scan
skips such beams), a finite range outside ``[range_min, range_max]`` is invalid (a scan skips it), ``+inf`` ("no
return within range") reads as +inf, beyond ``range_max``, and ``-inf`` ("too close") as -inf, below ``range_min``:
bins whose outer edges are ``.inf`` read them. Everywhere else a value is finite: +-inf is refused (``non_finite``)
as NaN is.

A LaserScan's geometry is checked before any beam is read (``bad_geometry``): ``angle_increment`` finite and > 0
(a scan that turns clockwise with a negative increment is refused too), ``angle_min`` and ``angle_max`` finite
within [-2 pi, 2 pi] (:data:`MAX_SCAN_ANGLE`).

The work is what the adapter reads: one entry for an index (``ranges[3]``), the entries of ``index_range`` or of
the ``angle_range`` sector (its beams' angles come from the geometry, not from reading the others), every entry of a
sequence it reduces or matches against ``key``. A sequence read entry by entry with more than
``paths.MAX_ENTRIES`` entries is refused (``too_large``) before any entry is read.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from .config import LASER_SCAN, AdapterSpec
from .evidence import bin_probabilities, level_probabilities
from .paths import MAX_ENTRIES, Missing, TooLarge, is_message, message_fields, parse_path, resolve

# Every reason read_level refuses a message for, and what it means (docs/node.md lists them; each is a
# "rejected.<reason>" counter of node/conversion.REJECT_REASONS).
REASONS = {
    "missing_field": "the path does not resolve (a field, an index past the end of a sequence), key_field's entries "
                     "do not pair up with field's, index_range reaches past the sequence, or no beam is in the sector",
    "no_match": "nothing is selected (no entry has the key, an empty sequence) and empty_value is not set; or "
                "several entries have the key and there is no reduction",
    "non_finite": "the value is NaN, or +-inf outside REP 117's ranges (a vector's component, a float field, a "
                  "sequence reduced); a LaserScan sector whose beams are all NaN",
    "overflow": "the value is finite but its reduction is not (the norm of a vector with a component of 1e200: "
                "its square overflows a double; the mean of huge values), or an integer too large for a double",
    "bad_geometry": "a LaserScan whose angle_increment is not finite and > 0, or whose angle_min or angle_max is "
                    "not finite within [-2 pi, 2 pi]",
    "too_large": f"a sequence the adapter reads entry by entry has more than {MAX_ENTRIES} entries (paths.MAX_ENTRIES)",
    "out_of_limits": "REP 117: a Range's or a LaserScan beam's finite range outside the sensor's limits; a scan "
                     "sector with no beam within [range_min, range_max]",
    "out_of_bins": "a number outside [bins[0], bins[-1]]",
    "unknown_value": "a value that no entry of levels lists (or a string or boolean where bins need a number)",
}
# |angle_min| and |angle_max| of a LaserScan (radians): a full turn either way, with float32's rounding of 2 pi.
MAX_SCAN_ANGLE = 2 * math.pi + 1e-5


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
    """A message the adapter cannot read: ``reason`` (a key of :data:`REASONS`) and the detail."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def _reduce(values: np.ndarray, reduction: str, what: str) -> float:
    """min / max / mean / norm of ``values`` (float64, NaN-free). Refused ``overflow`` when the values are finite
    but the result is not (the norm's squares, the mean's sum)."""
    with np.errstate(over="ignore", invalid="ignore"):
        if reduction == "norm":
            result = float(np.sqrt(np.sum(np.square(values))))
        else:
            result = float({"min": np.min, "max": np.max, "mean": np.mean}[reduction](values))
    if not math.isfinite(result) and np.isfinite(values).all():
        raise Refused("overflow", f"the {reduction} of {what} overflows a double (its values are finite)")
    return result


def reduce_values(values: Any, reduction: str, index_range: Optional[tuple[int, int]]) -> Optional[float]:
    """min / max / mean / norm of ``values[first:end]`` (all when ``index_range`` is None), in float64; None when
    the range reaches past the sequence or selects nothing. NaN entries make the result NaN."""
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
    try:
        return _reduce(array, reduction, "the values")
    except Refused:
        return float("inf")


def _as_float(value: Any, what: str) -> float:
    """A number as a float; Refused ``overflow`` for an integer too large for a double."""
    try:
        return float(value)
    except OverflowError:
        raise Refused("overflow", f"{what} = {value} is too large for a double") from None


def vector_norm(msg: Any, what: str) -> float:
    """The Euclidean norm of a message of numbers (geometry_msgs Vector3: x, y, z); every component finite."""
    components = np.array([_as_float(getattr(msg, name), f"{what}.{name}") for name in message_fields(msg)],
                          dtype=np.float64)
    if not np.isfinite(components).all():
        raise Refused("non_finite", f"{what} has a component that is NaN or infinite")
    return _reduce(components, "norm", what)


def check_scan_geometry(scan: Any) -> None:
    """Refused ``bad_geometry`` unless angle_increment is finite and > 0 and angle_min, angle_max are finite
    within [-MAX_SCAN_ANGLE, MAX_SCAN_ANGLE]."""
    increment, low, high = (float(scan.angle_increment), float(scan.angle_min), float(scan.angle_max))
    if not (math.isfinite(increment) and 0.0 < increment <= MAX_SCAN_ANGLE):
        raise Refused("bad_geometry", f"angle_increment = {increment:g}: a scan's beams need a finite increment > 0")
    if not all(math.isfinite(a) and abs(a) <= MAX_SCAN_ANGLE for a in (low, high)):
        raise Refused("bad_geometry", f"angle_min = {low:g}, angle_max = {high:g}: a scan's angles are finite radians "
                                      "within [-2 pi, 2 pi]")


def beam_angles(scan: Any, count: int) -> np.ndarray:
    """(count,) the angle of each beam of a LaserScan: angle_min + i * angle_increment, float64."""
    return float(scan.angle_min) + np.arange(count, dtype=np.float64) * float(scan.angle_increment)


def in_sector(angles: np.ndarray, sector: tuple[float, float]) -> np.ndarray:
    """Which angles lie in [from, to] (radians), comparing modulo 2 pi (a sector may cross +-pi)."""
    start, end = sector
    offset = np.mod(angles - start, 2 * np.pi)
    return offset <= (end - start) + 1e-9


def _floats(sequence: Any, first: int, end: int) -> np.ndarray:
    """Entries [first, end) of a sequence as float64: only those entries are read (a slice)."""
    return np.asarray(sequence[first:end], dtype=np.float64).ravel()


def _gather(sequence: Any, chosen: np.ndarray) -> np.ndarray:
    """The entries of ``sequence`` where ``chosen`` (bool, one per entry) holds, read run by run (a sector is one
    run, or two where it crosses the scan's start)."""
    index = np.flatnonzero(chosen)
    if index.size == 0:
        return np.zeros(0, dtype=np.float64)
    breaks = np.flatnonzero(np.diff(index) != 1) + 1
    starts, ends = index[np.r_[0, breaks]], index[np.r_[breaks - 1, index.size - 1]] + 1
    return np.concatenate([_floats(sequence, int(a), int(b)) for a, b in zip(starts, ends)])


def scan_value(scan: Any, spec: AdapterSpec) -> float:
    """A LaserScan's ranges (or intensities) in the sector, reduced (REP 117 for ranges, see the module)."""
    check_scan_geometry(scan)
    sequence = getattr(scan, spec.scan_beams)
    count = len(sequence)
    if count > MAX_ENTRIES:
        raise Refused("too_large", f"{spec.field} has {count} beams, more than the cap of {MAX_ENTRIES}")
    if spec.index_range is not None:
        first, end = spec.index_range
        if end > count:
            raise Refused("missing_field", f"{spec.field} has {count} entries; index_range "
                                           f"{list(spec.index_range)} reaches past it")
        beams = _floats(sequence, first, end)
    elif spec.angle_range is not None:
        beams = _gather(sequence, in_sector(beam_angles(scan, count), spec.angle_range))
    else:
        beams = _floats(sequence, 0, count)
    if beams.size == 0:
        raise Refused("missing_field", f"{spec.field}: no beam in the sector ({count} beams)")
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
        if spec.reduction == "mean" and np.isposinf(beams).any() and np.isneginf(beams).any():
            raise Refused("non_finite", f"the mean of {spec.field} has +inf and -inf beams")
    elif not np.isfinite(beams).all():
        raise Refused("non_finite", f"{spec.field} has NaN or infinite entries")
    return _reduce(beams, spec.reduction, spec.field)


def _key_indices(keys: Any, key: Any) -> list[int]:
    """The entries of ``keys`` (a float64 array or a list) equal to ``key`` as :func:`_same` compares."""
    if isinstance(keys, np.ndarray):
        if isinstance(key, (bool, str)):
            return []
        return np.flatnonzero(keys == key).tolist()
    if isinstance(key, str):  # a JointState's names: the common case, kept to one type test and one compare
        return [k for k, entry in enumerate(keys) if isinstance(entry, str) and entry == key]
    return [k for k, entry in enumerate(keys) if _same(entry, key)]


def select_value(msg: Any, spec: AdapterSpec) -> Any:
    """The one value ``spec`` reads from ``msg`` (a number for bins); Refused when there is none."""
    if spec.type == LASER_SCAN:
        if spec.scan_beams:
            return scan_value(msg, spec)
        check_scan_geometry(msg)
    try:
        got = resolve(msg, parse_path(spec.field), MAX_ENTRIES)
        keys = resolve(msg, parse_path(spec.key_field), MAX_ENTRIES) if spec.key_field is not None else None
    except Missing as exc:
        raise Refused("missing_field", f"{spec.type}: {exc}") from None
    except TooLarge as exc:
        raise Refused("too_large", f"{spec.type}: {exc}") from None
    if not got.many:
        value = got.value
        if spec.reduction == "norm" and is_message(value):
            return vector_norm(value, spec.field)
        if spec.rep117 == "range":
            return limited_range(value, float(msg.min_range), float(msg.max_range), "range")
        if spec.rep117 == "beam":
            return limited_range(value, float(msg.range_min), float(msg.range_max), spec.field)
        return value
    values = got.values
    if keys is not None:
        if len(keys.values) != len(values):
            raise Refused("missing_field", f"{spec.field} has {len(values)} entries but {spec.key_field} has "
                                           f"{len(keys.values)}")
        chosen = _key_indices(keys.values, spec.key)
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
    if not np.isfinite(values).all():
        raise Refused("non_finite", f"{spec.field} has NaN or infinite entries")
    return _reduce(values, spec.reduction, spec.field)


def limited_range(value: Any, low: float, high: float, what: str) -> float:
    """A range by REP 117 (a Range's ``range``, a LaserScan's beam): NaN refused (``non_finite``), +-inf as they
    are, a finite value outside [low, high] refused (``out_of_limits``)."""
    if isinstance(value, (bool, str)) or not isinstance(value, (int, float, np.number)):
        raise Refused("unknown_value", f"{what} = {value!r} is not a number")
    value = _as_float(value, what)
    if math.isnan(value):
        raise Refused("non_finite", f"{what} is NaN (no reading, REP 117)")
    if math.isfinite(value) and not low <= value <= high:
        raise Refused("out_of_limits", f"{what} {value:g} is outside the sensor's limits [{low:g}, {high:g}] "
                                       "(REP 117)")
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


def _finite_or_rep117(value: float, spec: AdapterSpec) -> Optional[Reading]:
    """The refusal of a NaN, or of +-inf outside REP 117's ranges; None when ``value`` may be read."""
    if math.isnan(value):
        return Reading(None, "non_finite", f"{spec.field} is NaN")
    if math.isinf(value) and not spec.rep117:
        return Reading(None, "non_finite", f"{spec.field} = {value:g}: only a range (REP 117) may be infinite")
    return None


def read_level(msg: Any, spec: AdapterSpec) -> Reading:
    """The observation ``spec`` reads from ``msg`` (see the module docstring). Never raises."""
    try:
        value = select_value(msg, spec)
        if spec.bins is not None:
            return _binned(value, spec)
        if isinstance(value, (float, np.floating)):
            refused = _finite_or_rep117(float(value), spec)
            if refused is not None:
                return refused
    except Refused as exc:
        return Reading(None, exc.reason, exc.detail)
    except OverflowError as exc:  # an integer too large for a double, converted by numpy
        return Reading(None, "overflow", f"{spec.field}: {exc}")
    except (AttributeError, TypeError, ValueError, IndexError) as exc:  # a message unlike its type's definition
        return Reading(None, "missing_field", f"{type(exc).__name__}: {exc}")
    level = mapped_level(value, spec.level_of)
    if level is None:
        return Reading(None, "unknown_value", f"{spec.field} = {value!r} is not among the values of levels "
                                              f"{sorted({repr(v) for v, _ in spec.level_of})}")
    return _with_confusion(level, spec)


def _binned(value: Any, spec: AdapterSpec) -> Reading:
    """A number's level by the bins (with sigma: the Gaussian mass of each interval); Refused when it has none."""
    if isinstance(value, (bool, str)) or not isinstance(value, (int, float, np.number)):
        return Reading(None, "unknown_value", f"{spec.field} = {value!r} is not a number")
    value = _as_float(value, spec.field)
    refused = _finite_or_rep117(value, spec)
    if refused is not None:
        return refused
    level = bin_level(value, spec.bins, spec.bin_levels)
    if level is None:
        return Reading(None, "out_of_bins", f"{spec.field} = {value:g} is outside the bins "
                                            f"[{spec.bins[0]:g}, {spec.bins[-1]:g}]")
    if spec.sigma is not None:
        probabilities = bin_probabilities(value, spec.bins, spec.bin_levels, spec.sigma, spec.num_levels)
        return Reading(int(np.argmax(probabilities)), probabilities=probabilities)
    return _with_confusion(level, spec)


def _with_confusion(level: int, spec: AdapterSpec) -> Reading:
    row = level_probabilities(level, spec.confusion)
    return Reading(level) if row is None else Reading(level, probabilities=row)
