"""Sensor adapters' configuration (pure: no rclpy): the ``adapters.<modality>.*`` parameters, checked into one
frozen :class:`AdapterSpec` per adapted modality.

Parameters (``<m>`` is a modality of the model):

- ``adapters.<m>.topic`` (string, required): the topic, relative to the node's namespace like every other topic.
- ``adapters.<m>.type`` (string, required): the message type, ``pkg/msg/Name`` (or ``pkg/Name``).
- ``adapters.<m>.field`` (string, required): a dotted path into the message (``voltage``, ``range``,
  ``data``, ``header.frame_id``); the value must be a number, a boolean, a string or (with a reduction) a
  sequence of numbers.
- ``adapters.<m>.reduction`` (``min`` | ``max`` | ``mean``): required when the field is a sequence
  (``LaserScan.ranges``); ``adapters.<m>.index_range`` ``[first, end)`` (two integers) picks the entries it
  reduces (default: all of them).
- either ``adapters.<m>.bins``: ascending edges ``[e0, e1, ..., en]`` (numbers); a value in ``[e_k, e_k+1)`` (the
  last interval closed) gets the level of interval k: ``adapters.<m>.bin_levels`` (one level per interval, by
  label or index; default 0, 1, ...). A value outside ``[e0, en]`` is refused (``out_of_bins``).
- or ``adapters.<m>.levels``: which message values give which level, for enums, booleans and strings. Either a
  map ``levels.<level label or index>: value or [values]`` (several values may give one level), or a list whose
  entry k is the value of level k. A value no level lists is refused (``unknown_value``).

A map is keyed by level (not by value) because ROS 2 parameter names cannot be arbitrary values (an empty string,
``1.5``) and a parameter holds one type. Every error names the parameter and what was expected.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

PREFIX = "adapters."
REDUCTIONS = ("min", "max", "mean")
# Keys one adapter reads (``levels`` also as ``levels.<level>``).
KEYS = ("topic", "type", "field", "reduction", "index_range", "bins", "bin_levels", "levels")
# The message types the package tests (any importable message type with such a field works).
TESTED_TYPES = (
    "sensor_msgs/msg/BatteryState", "sensor_msgs/msg/LaserScan", "sensor_msgs/msg/Range",
    "sensor_msgs/msg/Temperature", "std_msgs/msg/Bool", "std_msgs/msg/Int32", "std_msgs/msg/Float32",
    "std_msgs/msg/Float64", "std_msgs/msg/String",
)
# (parameter, what it holds) of every key: the node's --help lists them, README's "Sensor adapters" too.
PARAMETER_HELP = (
    ("topic", "string, required: the topic to read, relative to the node's namespace (replaces "
              "observations/<modality>)"),
    ("type", "string, required: the message type, e.g. sensor_msgs/msg/BatteryState"),
    ("field", "string, required: a dotted path to a number, boolean or string field (voltage, data, header.frame_id), "
              "or to a sequence of numbers with a reduction (ranges)"),
    ("reduction", "min | max | mean: a sequence field reduced to one number"),
    ("index_range", "[first, end): the entries of the sequence the reduction reads (default: all)"),
    ("bins", "ascending edges [e0, ..., en]: a number in [e_k, e_k+1) gets interval k's level (the last interval "
             "closed); outside [e0, en] it is refused (out_of_bins)"),
    ("bin_levels", "the level of each interval of bins, by label or index (default 0, 1, ...)"),
    ("levels", "for enums, booleans and strings: levels.<level label or index>: a value or a list of values, or a "
               "list whose entry k is level k's value; any other value is refused (unknown_value)"),
)
assert tuple(k for k, _ in PARAMETER_HELP) == KEYS


class AdapterConfigError(ValueError):
    """An ``adapters.*`` parameter that cannot be used; the message names it."""


@dataclass(frozen=True)
class AdapterSpec:
    """One modality's adapter. ``bins``: edges (n+1,) with ``bin_levels`` (n,); or ``level_of``: (value, level)
    pairs. ``index_range``: (first, end) or None (all entries)."""

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

    @property
    def param(self) -> str:
        return f"{PREFIX}{self.modality}"


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
        if key.split(".")[0] not in KEYS:
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
    if any(not part.isidentifier() for part in field.split(".")):
        raise AdapterConfigError(f"{PREFIX}{name}.field: expected a dotted path of field names such as "
                                 f"'voltage' or 'header.frame_id', got {field!r}")
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
            raise AdapterConfigError(f"{PREFIX}{name}.index_range: needs a reduction (min, max or mean)")
        index_range = (int(span[0]), int(span[1]))
    has_bins = "bins" in keys
    has_levels = "levels" in keys or any(k.startswith("levels.") for k in keys)
    if has_bins == has_levels:
        raise AdapterConfigError(f"{PREFIX}{name}: set either bins (numbers) or levels (values), "
                                 f"{'not both' if has_bins else 'one of them'}")
    if "bin_levels" in keys and not has_bins:
        raise AdapterConfigError(f"{PREFIX}{name}.bin_levels: needs bins")
    common = dict(modality=name, modality_index=index, num_levels=len(labels), topic=keys["topic"].strip(),
                  type=msg_type, field=field, reduction=reduction, index_range=index_range)
    if has_bins:
        edges, levels = _bins(name, keys, labels)
        return AdapterSpec(**common, bins=edges, bin_levels=levels)
    if reduction is not None:
        raise AdapterConfigError(f"{PREFIX}{name}.reduction: a reduced value is a number; use bins, not levels")
    return AdapterSpec(**common, level_of=_levels(name, keys, labels))


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


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested mapping (a params file's ``ros__parameters``) -> flat ROS parameter names."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out
