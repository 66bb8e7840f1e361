"""Sensor adapters' configuration (pure: no rclpy): the ``adapters.<modality>.*`` parameters, checked into one
frozen :class:`AdapterSpec` per adapted modality.

Parameters (``<m>`` is a modality of the model; :data:`PARAMETER_HELP` says the same in one line each):

- ``topic``, ``type`` (``pkg/msg/Name``), ``field`` (required): the topic (relative to the node's namespace), the
  message type, and a path into the message (``adapters/paths.py``): ``voltage``, ``header.frame_id``,
  ``position[2]``, ``detections[].results[].hypothesis.score``, ``twist.twist.linear``.
- ``key_field`` and ``key``: of the values ``field`` gives, keep those whose ``key_field`` entry equals ``key``
  (JointState: ``field: position, key_field: name, key: gripper_joint``). ``key_field`` passes through the same
  sequences as ``field``.
- ``reduction`` (``min`` | ``max`` | ``mean`` | ``norm``): many values -> one number (``norm``: the Euclidean norm
  of a vector message such as ``geometry_msgs/Vector3``, or of the values); ``index_range`` ``[first, end)`` or, for
  a LaserScan, ``angle_range`` ``[from, to]`` (radians in the scan's frame) picks the entries it reads;
  ``empty_value``: the value when nothing is selected (no detection of the class: score 0.0).
- either ``bins``: ascending edges ``[e0, ..., en]`` (``.inf`` allowed); a value in ``[e_k, e_k+1)`` (the last interval
  closed) gets the level of interval k, ``bin_levels`` (by label or index; default 0, 1, ...). A value outside
  ``[e0, en]`` is refused (``out_of_bins``). ``sigma`` > 0: the value's noise (one standard deviation); the
  observation is then the Gaussian mass of each interval (the first and last open: they take the tails) summed
  by level, sent as ``probabilities``.
- or ``levels``: which message values give which level, for enums, booleans and strings: a map ``levels.<level
  label or index>: value or [values]``, or a list whose entry k is the value of level k. A value no level lists is
  refused (``unknown_value``).
- ``confusion.<level>``: the observation sent when the value reads as that level, a distribution over the
  modality's levels (a row of the sensor's confusion matrix); a level without a row stays one-hot.

A map is keyed by level (not by value) because ROS 2 parameter names cannot be arbitrary values (an empty string,
``1.5``) and a parameter holds one type. Every error names the parameter and what was expected.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from .paths import PathError, parse_path

PREFIX = "adapters."
REDUCTIONS = ("min", "max", "mean", "norm")
# Keys one adapter reads (``levels`` also as ``levels.<level>``, ``confusion`` only as ``confusion.<level>``).
KEYS = ("topic", "type", "field", "key_field", "key", "reduction", "index_range", "angle_range", "empty_value", "bins",
        "bin_levels", "sigma", "levels", "confusion")
LASER_SCAN, RANGE = "sensor_msgs/msg/LaserScan", "sensor_msgs/msg/Range"
# A sum of probabilities (a confusion row) further than this from 1 is refused.
PROBABILITY_SUM_ATOL = 1e-6
# The message types the package tests (any importable message type with such a field works).
TESTED_TYPES = (
    "sensor_msgs/msg/BatteryState", "sensor_msgs/msg/LaserScan", "sensor_msgs/msg/Range",
    "sensor_msgs/msg/Temperature", "sensor_msgs/msg/JointState", "sensor_msgs/msg/Imu", "nav_msgs/msg/Odometry",
    "vision_msgs/msg/Detection2DArray", "std_msgs/msg/Bool", "std_msgs/msg/Int32", "std_msgs/msg/Float32",
    "std_msgs/msg/Float64", "std_msgs/msg/String",
)
# (parameter, what it holds) of every key: the node's --help lists them, README's "Sensor adapters" too.
PARAMETER_HELP = (
    ("topic", "string, required: the topic to read, relative to the node's namespace (replaces "
              "observations/<modality>)"),
    ("type", "string, required: the message type, e.g. sensor_msgs/msg/BatteryState (checked against the "
             "installed message packages)"),
    ("field", "string, required: a path to the value: voltage, header.frame_id, position[2] (entry 2), "
              "detections[].results[].hypothesis.score ([]: every entry), twist.twist.linear (a vector: norm)"),
    ("key_field", "a path that pairs up with field's entries (JointState: name); with key: keep the entries whose "
                  "key_field equals key"),
    ("key", "the key_field value to select (a joint name, a detector's class_id)"),
    ("reduction", "min | max | mean | norm: many values (a sequence, every entry []) to one number; norm: the "
                  "Euclidean norm of a vector message (geometry_msgs/Vector3) or of the values"),
    ("index_range", "[first, end): the entries of the sequence the reduction reads (default: all)"),
    ("angle_range", "[from, to]: a LaserScan's beams between these angles (radians, the scan's frame) for the "
                    "reduction; NaN beams and beams outside [range_min, range_max] are skipped, +inf is beyond "
                    "range_max, -inf below range_min (REP 117)"),
    ("empty_value", "the value when the reduction selects nothing (no detection of the key's class: 0.0); "
                    "default: refused (no_match)"),
    ("bins", "ascending edges [e0, ..., en] (.inf allowed): a number in [e_k, e_k+1) gets interval k's level (the "
             "last interval closed); outside [e0, en] it is refused (out_of_bins)"),
    ("bin_levels", "the level of each interval of bins, by label or index (default 0, 1, ...)"),
    ("sigma", "the value's noise (a standard deviation, > 0): the observation is the Gaussian mass of each interval "
              "of bins (the first and last open), as probabilities; default: one-hot"),
    ("levels", "for enums, booleans and strings: levels.<level label or index>: a value or a list of values, or a "
               "list whose entry k is level k's value; any other value is refused (unknown_value)"),
    ("confusion", "confusion.<level>: the probabilities over the modality's levels sent when the value reads as "
                  "that level (a row of the sensor's confusion matrix); default: one-hot"),
)
assert tuple(k for k, _ in PARAMETER_HELP) == KEYS


class AdapterConfigError(ValueError):
    """An ``adapters.*`` parameter that cannot be used; the message names it."""


@dataclass(frozen=True)
class AdapterSpec:
    """One modality's adapter. ``bins``: edges (n+1,) with ``bin_levels`` (n,); or ``level_of``: (value, level)
    pairs. ``index_range``: (first, end) or None (all entries); ``angle_range``: (from, to) radians or None.
    ``confusion``: (level, probabilities (num_levels,)) pairs."""

    modality: str
    modality_index: int
    num_levels: int
    topic: str
    type: str
    field: str
    reduction: Optional[str] = None
    index_range: Optional[tuple[int, int]] = None
    bins: Optional[tuple[float, ...]] = None
    bin_levels: Optional[tuple[int, ...]] = None
    level_of: Optional[tuple[tuple[Any, int], ...]] = None
    key_field: Optional[str] = None
    key: Any = None
    angle_range: Optional[tuple[float, float]] = None
    empty_value: Optional[float] = None
    sigma: Optional[float] = None
    confusion: tuple[tuple[int, tuple[float, ...]], ...] = ()

    @property
    def param(self) -> str:
        return f"{PREFIX}{self.modality}"

    @property
    def scan_beams(self) -> str:
        """``ranges`` or ``intensities`` when this adapter reads a LaserScan's beams as a whole (a sector), else ""."""
        if self.type == LASER_SCAN and self.field.removesuffix("[]") in ("ranges", "intensities"):
            return self.field.removesuffix("[]")
        return ""

    @property
    def rep117(self) -> str:
        """Which REP 117 reading applies: ``"scan"`` (a LaserScan's ``ranges``), ``"range"`` (a Range's ``range``)
        or "" (none)."""
        if self.scan_beams == "ranges":
            return "scan"
        return "range" if self.type == RANGE and self.field == "range" else ""


def normalize_type(name: str) -> str:
    """``pkg/Name`` -> ``pkg/msg/Name``; anything that is not a message type name raises ValueError."""
    parts = str(name).strip().split("/")
    if len(parts) == 2:
        parts = [parts[0], "msg", parts[1]]
    if len(parts) != 3 or parts[1] != "msg" or not all(p.replace("_", "a").isalnum() for p in parts):
        raise ValueError(f"expected a message type such as 'sensor_msgs/msg/BatteryState', got {name!r}")
    return "/".join(parts)


def _level(value: Any, labels: Sequence[str], param: str) -> int:
    """A level given by its label or index -> its index."""
    text = str(value)
    if text in labels:
        return labels.index(text)
    if isinstance(value, bool) or not (isinstance(value, int) or text.isdigit()):
        raise AdapterConfigError(f"{param}: {value!r} is not a level of the modality (labels {list(labels)} or "
                                 f"indices 0..{len(labels) - 1})")
    index = int(text)
    if not 0 <= index < len(labels):
        raise AdapterConfigError(f"{param}: level {index} is out of range: the modality has {len(labels)} levels "
                                 f"(0..{len(labels) - 1})")
    return index


def _as_list(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) or type(value).__name__ == "array" else [value]


def _bins(name: str, keys: Mapping[str, Any], labels: Sequence[str]) -> tuple[tuple[float, ...], tuple[int, ...]]:
    param = f"{PREFIX}{name}.bins"
    edges = _as_list(keys["bins"])
    if len(edges) < 2 or any(isinstance(e, (bool, str)) or not isinstance(e, (int, float)) for e in edges):
        raise AdapterConfigError(f"{param}: expected at least two numbers (ascending edges), got {keys['bins']!r}")
    edges = [float(e) for e in edges]
    if any(math.isnan(e) for e in edges) or any(b <= a for a, b in zip(edges, edges[1:])):
        raise AdapterConfigError(f"{param}: edges must be strictly ascending, got {edges}")
    if "bin_levels" in keys:
        given = _as_list(keys["bin_levels"])
        if len(given) != len(edges) - 1:
            raise AdapterConfigError(f"{PREFIX}{name}.bin_levels: expected {len(edges) - 1} levels (one per interval "
                                     f"of bins), got {len(given)}")
        levels = tuple(_level(v, labels, f"{PREFIX}{name}.bin_levels") for v in given)
    else:
        if len(edges) - 1 > len(labels):
            raise AdapterConfigError(f"{param}: {len(edges) - 1} intervals give levels 0..{len(edges) - 2}, but the "
                                     f"modality has {len(labels)} levels (set bin_levels)")
        levels = tuple(range(len(edges) - 1))
    return tuple(edges), levels


def _levels(name: str, keys: Mapping[str, Any], labels: Sequence[str]) -> tuple[tuple[Any, int], ...]:
    pairs: list[tuple[Any, int]] = []
    if "levels" in keys:
        values = _as_list(keys["levels"])
        if len(values) > len(labels):
            raise AdapterConfigError(f"{PREFIX}{name}.levels: {len(values)} values, but the modality has "
                                     f"{len(labels)} levels")
        pairs = [(v, k) for k, v in enumerate(values)]
    for key, value in keys.items():
        if key.startswith("levels."):
            level = _level(key[len("levels."):], labels, f"{PREFIX}{name}.{key}")
            pairs += [(v, level) for v in _as_list(value)]
    seen: dict[Any, int] = {}
    for value, level in pairs:
        if isinstance(value, float) and math.isnan(value):
            raise AdapterConfigError(f"{PREFIX}{name}.levels: NaN cannot be a value")
        if (type(value), value) in seen and seen[(type(value), value)] != level:
            raise AdapterConfigError(f"{PREFIX}{name}.levels: the value {value!r} is given to two levels "
                                     f"({labels[seen[(type(value), value)]]} and {labels[level]})")
        seen[(type(value), value)] = level
    if not pairs:
        raise AdapterConfigError(f"{PREFIX}{name}.levels: no values given")
    return tuple(pairs)


def parse_adapter(name: str, keys: Mapping[str, Any], modality_names: Sequence[str],
                  level_labels: Sequence[Sequence[str]]) -> AdapterSpec:
    """One modality's keys (``topic``, ``type``, ... without the ``adapters.<m>.`` prefix) -> its spec."""
    if name not in modality_names:
        raise AdapterConfigError(f"{PREFIX}{name}: the model has no modality {name!r} (modalities: "
                                 f"{list(modality_names)})")
    for key in keys:
        if key not in KEYS and key.split(".")[0] not in ("levels", "confusion"):
            raise AdapterConfigError(f"{PREFIX}{name}.{key}: unknown key (expected one of {list(KEYS)})")
    for key in ("topic", "type", "field"):
        if not isinstance(keys.get(key), str) or not keys[key].strip():
            raise AdapterConfigError(f"{PREFIX}{name}.{key}: required, a non-empty string")
    index = list(modality_names).index(name)
    labels = [str(x) for x in level_labels[index]]
    try:
        msg_type = normalize_type(keys["type"])
    except ValueError as exc:
        raise AdapterConfigError(f"{PREFIX}{name}.type: {exc}") from None
    field = keys["field"].strip()
    try:
        parse_path(field)
    except PathError as exc:
        raise AdapterConfigError(f"{PREFIX}{name}.field: {exc}") from None
    reduction = keys.get("reduction")
    if reduction is not None and reduction not in REDUCTIONS:
        raise AdapterConfigError(f"{PREFIX}{name}.reduction: expected one of {list(REDUCTIONS)}, got {reduction!r}")
    index_range = None
    if "index_range" in keys:
        span = _as_list(keys["index_range"])
        if (len(span) != 2 or any(isinstance(v, bool) or not isinstance(v, int) for v in span)
                or not 0 <= span[0] < span[1]):
            raise AdapterConfigError(f"{PREFIX}{name}.index_range: expected [first, end) with 0 <= first < end, "
                                     f"got {keys['index_range']!r}")
        if reduction is None:
            raise AdapterConfigError(f"{PREFIX}{name}.index_range: needs a reduction (min, max, mean or norm)")
        index_range = (int(span[0]), int(span[1]))
    extra = dict(_selection(name, keys, reduction), angle_range=_angle_range(name, keys, msg_type,
                                                                                             field, index_range))
    if extra["angle_range"] is not None and reduction is None:
        raise AdapterConfigError(f"{PREFIX}{name}.angle_range: needs a reduction (min, max, mean or norm)")
    has_bins = "bins" in keys
    has_levels = "levels" in keys or any(k.startswith("levels.") for k in keys)
    if has_bins == has_levels:
        raise AdapterConfigError(f"{PREFIX}{name}: set either bins (numbers) or levels (values), "
                                 f"{'not both' if has_bins else 'one of them'}")
    if "bin_levels" in keys and not has_bins:
        raise AdapterConfigError(f"{PREFIX}{name}.bin_levels: needs bins")
    extra.update(_noise(name, keys, labels, has_bins))
    common = dict(modality=name, modality_index=index, num_levels=len(labels), topic=keys["topic"].strip(),
                  type=msg_type, field=field, reduction=reduction, index_range=index_range, **extra)
    if has_bins:
        edges, levels = _bins(name, keys, labels)
        return AdapterSpec(**common, bins=edges, bin_levels=levels)
    if reduction is not None:
        raise AdapterConfigError(f"{PREFIX}{name}.reduction: a reduced value is a number; use bins, not levels")
    return AdapterSpec(**common, level_of=_levels(name, keys, labels))


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _selection(name: str, keys: Mapping[str, Any], reduction: Optional[str]) -> dict[str, Any]:
    """key_field, key and empty_value."""
    out: dict[str, Any] = {"key_field": None, "key": None, "empty_value": None}
    if ("key_field" in keys) != ("key" in keys):
        missing = "key" if "key_field" in keys else "key_field"
        raise AdapterConfigError(f"{PREFIX}{name}.{missing}: needed with "
                                 f"{'key_field' if missing == 'key' else 'key'} (key_field: the path compared, "
                                 "key: the value selected)")
    if "key_field" in keys:
        if not isinstance(keys["key_field"], str) or not keys["key_field"].strip():
            raise AdapterConfigError(f"{PREFIX}{name}.key_field: expected a path such as 'name', got "
                                     f"{keys['key_field']!r}")
        try:
            parse_path(keys["key_field"].strip())
        except PathError as exc:
            raise AdapterConfigError(f"{PREFIX}{name}.key_field: {exc}") from None
        key = keys["key"]
        if isinstance(key, (list, tuple)) or not isinstance(key, (str, int, float, bool)) or \
                (isinstance(key, float) and math.isnan(key)):
            raise AdapterConfigError(f"{PREFIX}{name}.key: expected one string, number or boolean, got {key!r}")
        out.update(key_field=keys["key_field"].strip(), key=key)
    if "empty_value" in keys:
        value = keys["empty_value"]
        if not _number(value) or math.isnan(value):
            raise AdapterConfigError(f"{PREFIX}{name}.empty_value: expected a number, got {value!r}")
        if reduction is None:
            raise AdapterConfigError(f"{PREFIX}{name}.empty_value: needs a reduction (the value of an empty "
                                     "selection is what the reduction reads instead)")
        out["empty_value"] = float(value)
    return out


def _angle_range(name: str, keys: Mapping[str, Any], msg_type: str, field: str,
                 index_range: Optional[tuple[int, int]]) -> Optional[tuple[float, float]]:
    if "angle_range" not in keys:
        return None
    param = f"{PREFIX}{name}.angle_range"
    span = _as_list(keys["angle_range"])
    if len(span) != 2 or not all(_number(v) and math.isfinite(v) for v in span) or not span[0] < span[1] \
            or span[1] - span[0] > 2 * math.pi:
        raise AdapterConfigError(f"{param}: expected [from, to] in radians with from < to and to - from <= 2 pi, "
                                 f"got {keys['angle_range']!r}")
    if msg_type != LASER_SCAN or field.removesuffix("[]") not in ("ranges", "intensities"):
        raise AdapterConfigError(f"{param}: reads a {LASER_SCAN}'s ranges or intensities (the beams' angles); "
                                 f"this adapter reads {msg_type} {field}")
    if index_range is not None:
        raise AdapterConfigError(f"{param}: set angle_range or index_range, not both")
    return float(span[0]), float(span[1])


def _noise(name: str, keys: Mapping[str, Any], labels: Sequence[str], has_bins: bool) -> dict[str, Any]:
    """sigma and confusion.<level>."""
    out: dict[str, Any] = {"sigma": None, "confusion": ()}
    if "sigma" in keys:
        sigma = keys["sigma"]
        if not _number(sigma) or not math.isfinite(sigma) or sigma <= 0:
            raise AdapterConfigError(f"{PREFIX}{name}.sigma: expected a number > 0 (a standard deviation in the "
                                     f"field's unit), got {sigma!r}")
        if not has_bins:
            raise AdapterConfigError(f"{PREFIX}{name}.sigma: needs bins (for levels, give confusion.<level> rows)")
        out["sigma"] = float(sigma)
    rows = []
    for key, value in keys.items():
        if key == "confusion" or key.startswith("confusion."):
            param = f"{PREFIX}{name}.{key}"
            if key == "confusion":
                raise AdapterConfigError(f"{param}: give one row per level, confusion.<level>: [p_0, ..., "
                                         f"p_{len(labels) - 1}]")
            level = _level(key[len("confusion."):], labels, param)
            row = _as_list(value)
            if len(row) != len(labels) or not all(_number(p) and math.isfinite(p) and p >= 0 for p in row):
                raise AdapterConfigError(f"{param}: expected {len(labels)} probabilities >= 0 (one per level "
                                         f"{list(labels)}), got {value!r}")
            if abs(sum(row) - 1.0) > PROBABILITY_SUM_ATOL:
                raise AdapterConfigError(f"{param}: the probabilities sum to {sum(row):g}, not 1")
            rows.append((level, tuple(float(p) / sum(row) for p in row)))
    if rows and out["sigma"] is not None:
        raise AdapterConfigError(f"{PREFIX}{name}: set sigma or confusion rows, not both")
    out["confusion"] = tuple(sorted(rows))
    return out


def split_parameters(params: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``adapters.<m>.<key>`` -> {m: {key: value}} (other names are ignored)."""
    out: dict[str, dict[str, Any]] = {}
    for full, value in params.items():
        if not full.startswith(PREFIX):
            continue
        name, _, key = full[len(PREFIX):].partition(".")
        if not key:
            raise AdapterConfigError(f"{full}: expected {PREFIX}<modality>.<key> (keys: {list(KEYS)})")
        out.setdefault(name, {})[key] = value
    return out


def parse_adapters(params: Mapping[str, Any], modality_names: Sequence[str],
                   level_labels: Sequence[Sequence[str]]) -> dict[str, AdapterSpec]:
    """Every adapter in ``params`` (flat ROS parameter names -> values), by modality; AdapterConfigError names
    the first parameter that cannot be used."""
    return {name: parse_adapter(name, keys, modality_names, level_labels)
            for name, keys in sorted(split_parameters(params).items())}
