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

What is refused besides a wrong type or range: a value that is no ROS parameter value (a mapping where a value
belongs, a list of lists: a YAML file can hold them, ROS cannot); strings with spaces around them (``topic``,
``type``, ``field`` and ``key_field`` are exact); a level given twice (``confusion.near`` and ``confusion.0`` of
the same level; ``levels.near`` and ``levels.0``; ``levels`` as a list and as a map); an index or ``index_range``
at or past the cap on entries read (``paths.MAX_ENTRIES``); a key on a LaserScan's beams (a sector is chosen by
``angle_range`` or ``index_range``); an infinite ``levels`` value, ``key`` or ``empty_value`` (only a range is ever
infinite, REP 117, and a range is binned). ``check.py`` runs these checks and the message definition's as one
checker that returns refusals.
"""
from __future__ import annotations

import array
import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from .paths import ALL, MAX_ENTRIES, PathError, parse_path

PREFIX = "adapters."
REDUCTIONS = ("min", "max", "mean", "norm")
# Keys one adapter reads (``levels`` also as ``levels.<level>``, ``confusion`` only as ``confusion.<level>``).
KEYS = ("topic", "type", "field", "key_field", "key", "reduction", "index_range", "angle_range", "empty_value", "bins",
        "bin_levels", "sigma", "levels", "confusion")
LASER_SCAN, RANGE = "sensor_msgs/msg/LaserScan", "sensor_msgs/msg/Range"
SCAN_BEAMS = ("ranges", "intensities")
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
    ("field", "string, required, exact: a path to the value: voltage, header.frame_id, position[2] (entry 2; a "
              "LaserScan's ranges[i] by REP 117), detections[].results[].hypothesis.score ([]: every entry), "
              "twist.twist.linear (a vector: norm)"),
    ("key_field", "a path that pairs up with field's entries (JointState: name); with key: keep the entries whose "
                  "key_field equals key"),
    ("key", "the key_field value to select (a joint name, a detector's class_id)"),
    ("reduction", "min | max | mean | norm: many values (a sequence, every entry []) to one number; norm: the "
                  "Euclidean norm of a vector message (geometry_msgs/Vector3) or of the values"),
    ("index_range", f"[first, end): the entries of the sequence the reduction reads (default: all; end <= "
                    f"{MAX_ENTRIES}, the cap on entries read)"),
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
    """An adapter setting that cannot be used; the message starts with the parameter's full name
    (``adapters.voltage.bins``; ``adapters.voltage`` for the adapter as a whole), then ": " and the problem."""


def _refused(key: str, problem: str) -> AdapterConfigError:
    return AdapterConfigError(f"{key}: {problem}")


def shown(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters (a refused value may be a list of a million entries)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 5] + " ...)"


@dataclass(frozen=True)
class AdapterSpec:
    """One binding of a message field to a target's levels: an adapter binds a modality (``modality``,
    ``modality_index``, ``num_levels``: its observation levels). ``bins``: edges (n+1,) with ``bin_levels`` (n,); or
    ``level_of``: (value, level) pairs. ``index_range``: (first, end) or None (all entries); ``angle_range``: (from,
    to) radians or None. ``confusion``: (level, probabilities (num_levels,)) pairs, one per level at most.
    ``prefix``: the settings' prefix (``adapters.``), so that every message names the parameter."""

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
    prefix: str = PREFIX

    @property
    def param(self) -> str:
        return f"{self.prefix}{self.modality}"

    @property
    def scan_beams(self) -> str:
        """``ranges`` or ``intensities`` when this adapter reads a LaserScan's beams as a whole (a sector), else ""."""
        return scan_beams(self.type, self.field)

    @property
    def rep117(self) -> str:
        """Which REP 117 reading applies: ``"scan"`` (a LaserScan's ``ranges``), ``"beam"`` (one of them,
        ``ranges[i]``), ``"range"`` (a Range's ``range``) or "" (none: every value must be finite)."""
        return rep117(self.type, self.field)


def scan_beams(msg_type: str, field: str) -> str:
    """``ranges`` or ``intensities`` when ``field`` of ``msg_type`` is a LaserScan's beams as a whole, else ""."""
    name = field.removesuffix("[]")
    return name if msg_type == LASER_SCAN and name in SCAN_BEAMS else ""


def rep117(msg_type: str, field: str) -> str:
    """See :attr:`AdapterSpec.rep117`."""
    if scan_beams(msg_type, field) == "ranges":
        return "scan"
    if msg_type == LASER_SCAN:
        try:
            steps = parse_path(field)
        except PathError:
            return ""
        if len(steps) == 1 and steps[0].name == "ranges" and steps[0].index not in (None, ALL):
            return "beam"
    return "range" if msg_type == RANGE and field == "range" else ""


def normalize_type(name: str) -> str:
    """``pkg/Name`` -> ``pkg/msg/Name``; anything that is not a message type name raises ValueError."""
    parts = str(name).split("/")
    if len(parts) == 2:
        parts = [parts[0], "msg", parts[1]]
    if len(parts) != 3 or parts[1] != "msg" or not all(p.isascii() and p.replace("_", "a").isalnum() for p in parts):
        raise ValueError(f"expected a message type such as 'sensor_msgs/msg/BatteryState', got {shown(name)}")
    return "/".join(parts)


# ---- values --------------------------------------------------------------------------------------------------
_SCALARS = (bool, int, float, str)


def is_parameter_value(value: Any) -> bool:
    """A value a ROS 2 parameter can hold: a boolean, integer, double or string, or a sequence of them (rclpy gives
    a double or integer array as an ``array.array``). A YAML file can also hold a mapping inside a list, a list of
    lists or null: those are not."""
    if isinstance(value, _SCALARS):
        return True
    return isinstance(value, (list, tuple, array.array)) and all(isinstance(v, _SCALARS) for v in value)


def as_number(value: Any) -> Optional[float]:
    """``value`` as a float when it is a number (an int or a float, not a bool), else None; an integer too large
    for a float is None too."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:
        return None


def _as_list(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple, array.array)) else [value]


# What a setting's levels belong to, by its prefix, for the messages that name them: an adapter's are its
# modality's observation levels, a control binding's (``controls.<factor>``, adapters/controls.py) its factor's
# controls, an event's (``events.<name>``, adapters/events.py) its factor's states.
TARGET_NOUNS = {"adapters": "modality", "controls": "factor's control", "events": "factor"}


def target_noun(key: str) -> str:
    """``modality`` for ``adapters.*`` keys, ``factor's control`` for ``controls.*``, ``factor`` for ``events.*``."""
    return TARGET_NOUNS.get(key.split(".", 1)[0], "target")


def level_index(value: Any, labels: Sequence[str], key: str) -> int:
    """A level given by its label or by its index (an int, or a string of ASCII digits) -> its index;
    AdapterConfigError (``key``) otherwise."""
    if isinstance(value, str) and value in labels:
        return list(labels).index(value)
    if isinstance(value, int) and not isinstance(value, bool):
        index: Optional[int] = value
    elif isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 9:
        index = int(value)
    else:
        index = None
    if index is None:
        raise _refused(key, f"{shown(value)} is not a level of the {target_noun(key)} (labels {list(labels)} or "
                            f"indices 0..{len(labels) - 1})")
    if not 0 <= index < len(labels):
        raise _refused(key, f"level {index} is out of range: the {target_noun(key)} has {len(labels)} levels "
                            f"(0..{len(labels) - 1})")
    return index


def exact_string(root: str, keys: Mapping[str, Any], key: str, example: str) -> str:
    """A required string setting, exact: non-empty, without spaces around it."""
    value = keys.get(key)
    if not isinstance(value, str) or not value.strip():
        raise _refused(f"{root}.{key}", f"required, a non-empty string such as {example!r}, got {shown(value)}")
    if value != value.strip():
        raise _refused(f"{root}.{key}", f"{value!r} has spaces around it; names are exact (did you mean "
                                        f"{value.strip()!r}?)")
    return value


def _path(root: str, key: str, text: str) -> None:
    """``text`` is a path whose indices are below the cap on entries read."""
    try:
        steps = parse_path(text)
    except PathError as exc:
        raise _refused(f"{root}.{key}", str(exc)) from None
    for step in steps:
        if step.index is not None and step.index >= MAX_ENTRIES:
            raise _refused(f"{root}.{key}", f"index {step.index} of {step.name} is at or past the cap of "
                                            f"{MAX_ENTRIES} entries an adapter reads")


# ---- one adapter -------------------------------------------------------------------------------------------------
def parse_adapter(name: str, keys: Mapping[str, Any], modality_names: Sequence[str],
                  level_labels: Sequence[Sequence[str]], prefix: str = PREFIX) -> AdapterSpec:
    """One binding's keys (``topic``, ``type``, ... without the ``<prefix><name>.`` part) -> its spec;
    AdapterConfigError naming the first key that cannot be used. ``modality_names`` and ``level_labels``: the
    targets a name may bind to and their levels (a model's modalities and observation labels for ``adapters.``)."""
    root = f"{prefix}{name}"
    if name not in modality_names:
        raise _refused(root, f"the model has no modality {name!r} (modalities: {list(modality_names)})")
    for key, value in keys.items():
        if key not in KEYS and key.split(".")[0] not in ("levels", "confusion"):
            raise _refused(f"{root}.{key}", f"unknown key (expected one of {list(KEYS)})")
        if not is_parameter_value(value):
            raise _refused(f"{root}.{key}", f"expected a ROS parameter value (a boolean, integer, double or string, "
                                            f"or a list of one of those), got {shown(value)}")
    index = list(modality_names).index(name)
    labels = [str(x) for x in level_labels[index]]
    topic = exact_string(root, keys, "topic", "battery_state")
    given_type = exact_string(root, keys, "type", "sensor_msgs/msg/BatteryState")
    try:
        msg_type = normalize_type(given_type)
    except ValueError as exc:
        raise _refused(f"{root}.type", str(exc)) from None
    field = exact_string(root, keys, "field", "voltage")
    _path(root, "field", field)
    reduction = keys.get("reduction")
    if reduction is not None and reduction not in REDUCTIONS:
        raise _refused(f"{root}.reduction", f"expected one of {list(REDUCTIONS)}, got {shown(reduction)}")
    index_range = _index_range(root, keys, reduction)
    extra = dict(_selection(root, keys, reduction, msg_type, field),
                 angle_range=_angle_range(root, keys, msg_type, field, index_range))
    if extra["angle_range"] is not None and reduction is None:
        raise _refused(f"{root}.angle_range", "needs a reduction (min, max, mean or norm)")
    has_bins = "bins" in keys
    has_levels = "levels" in keys or any(k.startswith("levels.") for k in keys)
    if has_bins == has_levels:
        raise _refused(root, "set either bins (numbers) or levels (values), "
                             f"{'not both' if has_bins else 'one of them'}")
    if "bin_levels" in keys and not has_bins:
        raise _refused(f"{root}.bin_levels", "needs bins")
    extra.update(_noise(root, keys, labels, has_bins))
    common = dict(modality=name, modality_index=index, num_levels=len(labels), topic=topic, type=msg_type,
                  field=field, reduction=reduction, index_range=index_range, prefix=prefix, **extra)
    if has_bins:
        edges, levels = _bins(root, keys, labels)
        return AdapterSpec(**common, bins=edges, bin_levels=levels)
    if reduction is not None:
        raise _refused(f"{root}.reduction", "a reduced value is a number; use bins, not levels")
    return AdapterSpec(**common, level_of=_levels(root, keys, labels, infinite=bool(rep117(msg_type, field))))


def _index_range(root: str, keys: Mapping[str, Any], reduction: Optional[str]) -> Optional[tuple[int, int]]:
    if "index_range" not in keys:
        return None
    span = _as_list(keys["index_range"])
    if (len(span) != 2 or any(isinstance(v, bool) or not isinstance(v, int) for v in span)
            or not 0 <= span[0] < span[1] <= MAX_ENTRIES):
        raise _refused(f"{root}.index_range", f"expected [first, end) with 0 <= first < end <= {MAX_ENTRIES} (the cap "
                                              f"on entries an adapter reads), got {shown(keys['index_range'])}")
    if reduction is None:
        raise _refused(f"{root}.index_range", "needs a reduction (min, max, mean or norm)")
    return int(span[0]), int(span[1])


def _bins(root: str, keys: Mapping[str, Any], labels: Sequence[str]) -> tuple[tuple[float, ...], tuple[int, ...]]:
    param = f"{root}.bins"
    given = _as_list(keys["bins"])
    edges = [as_number(e) for e in given]
    if len(edges) < 2 or any(e is None for e in edges):
        raise _refused(param, f"expected at least two numbers (ascending edges), got {shown(keys['bins'])}")
    if any(math.isnan(e) for e in edges) or any(b <= a for a, b in zip(edges, edges[1:])):
        raise _refused(param, f"edges must be strictly ascending, got {shown(edges)}")
    if "bin_levels" in keys:
        named = _as_list(keys["bin_levels"])
        if len(named) != len(edges) - 1:
            raise _refused(f"{root}.bin_levels", f"expected {len(edges) - 1} levels (one per interval of bins), got "
                                                 f"{len(named)}")
        levels = tuple(level_index(v, labels, f"{root}.bin_levels") for v in named)
    else:
        if len(edges) - 1 > len(labels):
            raise _refused(param, f"{len(edges) - 1} intervals give levels 0..{len(edges) - 2}, but the "
                                  f"{target_noun(param)} has {len(labels)} levels (set bin_levels)")
        levels = tuple(range(len(edges) - 1))
    return tuple(edges), levels


def _levels(root: str, keys: Mapping[str, Any], labels: Sequence[str], infinite: bool) -> tuple[tuple[Any, int], ...]:
    """``levels`` as a list (entry k: level k's value) or as ``levels.<level>`` (one key per level), not both."""
    pairs: list[tuple[Any, int, str]] = []
    mapped = [k for k in keys if k.startswith("levels.")]
    if "levels" in keys:
        if mapped:
            raise _refused(f"{root}.levels", f"set levels as a list or as levels.<level>, not both (also given: "
                                             f"{', '.join(mapped)})")
        values = _as_list(keys["levels"])
        if len(values) > len(labels):
            raise _refused(f"{root}.levels", f"{len(values)} values, but the {target_noun(root)} has {len(labels)} "
                                             "levels")
        pairs = [(v, k, f"{root}.levels") for k, v in enumerate(values)]
    given: dict[int, str] = {}
    for key in mapped:
        level = level_index(key[len("levels."):], labels, f"{root}.{key}")
        if level in given:
            raise _refused(f"{root}.{key}", f"level {labels[level]!r} is given twice (also as {root}.{given[level]}); "
                                            "give its values once")
        given[level] = key
        pairs += [(v, level, f"{root}.{key}") for v in _as_list(keys[key])]
    seen: dict[tuple[str, Any], int] = {}
    for value, level, param in pairs:
        number = as_number(value)
        if isinstance(value, float) and math.isnan(value):
            raise _refused(param, "NaN cannot be a value")
        if number is not None and not math.isfinite(number) and not infinite:
            raise _refused(param, f"{value!r}: only a range (REP 117) is ever infinite; this field's values are finite")
        if number is None and isinstance(value, int) and not isinstance(value, bool):
            raise _refused(param, f"{shown(value)} is too large for a message's number")
        # a message compares 1 and 1.0 equal, True and 1 not (reading._same)
        same = ("number", number) if number is not None else (type(value).__name__, value)
        if seen.get(same, level) != level:
            raise _refused(f"{root}.levels", f"the value {value!r} is given to two levels "
                                             f"({labels[seen[same]]} and {labels[level]})")
        seen[same] = level
    if not pairs:
        raise _refused(f"{root}.levels", "no values given")
    return tuple((value, level) for value, level, _ in pairs)


def _selection(root: str, keys: Mapping[str, Any], reduction: Optional[str], msg_type: str,
               field: str) -> dict[str, Any]:
    """key_field, key and empty_value."""
    out: dict[str, Any] = {"key_field": None, "key": None, "empty_value": None}
    if ("key_field" in keys) != ("key" in keys):
        missing = "key" if "key_field" in keys else "key_field"
        raise _refused(f"{root}.{missing}", f"needed with {'key_field' if missing == 'key' else 'key'} (key_field: the "
                                            "path compared, key: the value selected)")
    if "key_field" in keys:
        key_field = exact_string(root, keys, "key_field", "name")
        _path(root, "key_field", key_field)
        if scan_beams(msg_type, field):
            raise _refused(f"{root}.key_field", f"a {LASER_SCAN}'s beams are chosen by angle_range or index_range, "
                                                "not by a key")
        key = keys["key"]
        number = as_number(key)
        if not isinstance(key, _SCALARS) or (number is None and not isinstance(key, (bool, str))) or \
                (number is not None and not math.isfinite(number)):
            raise _refused(f"{root}.key", f"expected one string, finite number or boolean, got {shown(key)}")
        out.update(key_field=key_field, key=key)
    if "empty_value" in keys:
        value = as_number(keys["empty_value"])
        if value is None or not math.isfinite(value):
            raise _refused(f"{root}.empty_value", f"expected a finite number, got {shown(keys['empty_value'])}")
        if reduction is None:
            raise _refused(f"{root}.empty_value", "needs a reduction (the value of an empty selection is what the "
                                                  "reduction reads instead)")
        out["empty_value"] = value
    return out


def _angle_range(root: str, keys: Mapping[str, Any], msg_type: str, field: str,
                 index_range: Optional[tuple[int, int]]) -> Optional[tuple[float, float]]:
    if "angle_range" not in keys:
        return None
    param = f"{root}.angle_range"
    span = [as_number(v) for v in _as_list(keys["angle_range"])]
    if len(span) != 2 or not all(v is not None and abs(v) <= 2 * math.pi for v in span) or not span[0] < span[1] \
            or span[1] - span[0] > 2 * math.pi:
        raise _refused(param, f"expected [from, to] in radians within [-2 pi, 2 pi], with from < to and to - from <= "
                              f"2 pi, got {shown(keys['angle_range'])}")
    if not scan_beams(msg_type, field):
        raise _refused(param, f"reads a {LASER_SCAN}'s ranges or intensities (the beams' angles); this adapter reads "
                              f"{msg_type} {field}")
    if index_range is not None:
        raise _refused(param, "set angle_range or index_range, not both")
    return float(span[0]), float(span[1])


def _noise(root: str, keys: Mapping[str, Any], labels: Sequence[str], has_bins: bool) -> dict[str, Any]:
    """sigma and confusion.<level> (one row per level)."""
    out: dict[str, Any] = {"sigma": None, "confusion": ()}
    if "sigma" in keys:
        sigma = as_number(keys["sigma"])
        if sigma is None or not math.isfinite(sigma) or sigma <= 0:
            raise _refused(f"{root}.sigma", f"expected a number > 0 (a standard deviation in the field's unit), got "
                                            f"{shown(keys['sigma'])}")
        if not has_bins:
            raise _refused(f"{root}.sigma", "needs bins (for levels, give confusion.<level> rows)")
        out["sigma"] = sigma
    rows: dict[int, tuple[str, tuple[float, ...]]] = {}
    for key, value in keys.items():
        if key != "confusion" and not key.startswith("confusion."):
            continue
        param = f"{root}.{key}"
        if key == "confusion":
            raise _refused(param, f"give one row per level, confusion.<level>: [p_0, ..., p_{len(labels) - 1}]")
        level = level_index(key[len("confusion."):], labels, param)
        if level in rows:
            raise _refused(param, f"a second row for level {labels[level]!r} (also given as {rows[level][0]}); give "
                                  "one row per level")
        row = [as_number(p) for p in _as_list(value)]
        if len(row) != len(labels) or not all(p is not None and math.isfinite(p) and p >= 0 for p in row):
            raise _refused(param, f"expected {len(labels)} probabilities >= 0 (one per level {list(labels)}), got "
                                  f"{shown(value)}")
        total = math.fsum(row)
        if abs(total - 1.0) > PROBABILITY_SUM_ATOL:
            raise _refused(param, f"the probabilities sum to {total:g}, not 1")
        rows[level] = (param, tuple(p / total for p in row))
    if rows and out["sigma"] is not None:
        raise _refused(root, "set sigma or confusion rows, not both")
    out["confusion"] = tuple((level, row) for level, (_, row) in sorted(rows.items()))
    return out

