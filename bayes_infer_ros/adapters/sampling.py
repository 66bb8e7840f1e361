"""The inverse of an adapter, for sample bags: a message that the adapter reads as a given level.

:func:`sample_value` draws the value: bins, uniform within the first interval of ``bins`` whose level is the wanted
one (an infinite edge is replaced by the finite one +- ``INFINITE_EDGE_SPAN``); levels, one of the values listed for
the level. :func:`write_sample` writes it into a message (``new_entry`` makes a sequence's new entry, e.g. a
``Detection2D``), so that :func:`~.reading.read_level` reads the level back:

- a path with indices: the entries up to the index are made;
- a key (``key_field``/``key``): the value at one entry whose key is ``key``, among entries with another key
  (``OTHER_KEY``) and random values; where ``empty_value`` reads as the level, sometimes no entry has the key;
- ``norm``: a vector of that length in a random direction;
- a reduction over a sequence: every entry read gets a value of the level's interval (so min, max and mean fall in
  it), the others any value within the bins;
- a Range (REP 117): limits from the bins, a reading within them, or +-inf where the level's interval is open;
- one beam of a LaserScan (``ranges[i]``, REP 117): as a Range, in a full scan of valid geometry;
- a LaserScan's beams (REP 117): a full scan (``SCAN_BEAMS`` beams around the circle, range limits from the bins);
  some beams of the sector are NaN or beyond ``range_max`` (skipped), some +inf under ``min`` (-inf under ``max``)
  where the level's interval reaches the infinite edge, and a level beyond ``range_max`` is all +inf.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from .config import LASER_SCAN, AdapterSpec
from .paths import ALL, Step, is_sequence, message_fields, parse_path
from .reading import beam_angles, in_sector

INFINITE_EDGE_SPAN = 10.0
# Length of a sequence field (a LaserScan's ranges) when index_range does not need more.
DEFAULT_SEQUENCE_LENGTH = 360
SCAN_BEAMS = 360
OTHER_KEY = "other"  # the key of the entries that are not selected (a string key_field; a number's: key + 1)
# How often a sample bag's scan has each kind of beam REP 117 skips, or an infinite one (per beam of the sector).
NAN_BEAM, FAR_BEAM, INF_BEAM = 0.1, 0.05, 0.2

NewEntry = Callable[[Any, str], Any]  # (message, sequence field of messages) -> a new default entry of it


class NotSampleable(ValueError):
    """The adapter gives no value for a level (its bins / levels never produce it)."""


def _interval(spec: AdapterSpec, level: int) -> tuple[float, float]:
    """The first interval of ``bins`` whose level is ``level`` (its edges as they are, possibly infinite)."""
    for k, got in enumerate(spec.bin_levels):
        if got == level:
            return spec.bins[k], spec.bins[k + 1]
    raise NotSampleable(f"{spec.param}: no interval of bins gives level {level} (bin_levels {list(spec.bin_levels)})")


def _finite(lo: float, hi: float) -> tuple[float, float]:
    if not math.isfinite(lo):
        lo = hi - INFINITE_EDGE_SPAN
    if not math.isfinite(hi):
        hi = lo + INFINITE_EDGE_SPAN
    return lo, hi


def _uniform(rng: np.random.Generator, lo: float, hi: float, size=None) -> Any:
    # [lo, hi) in float32 (the fields are float32 mostly): keep clear of both edges, which rounding could cross
    width = hi - lo
    return lo + width * 1e-3 + rng.random(size) * width * (1.0 - 2e-3)


def bins_span(spec: AdapterSpec) -> tuple[float, float]:
    """The finite span of every interval of the bins (infinite edges replaced as in :func:`_interval`)."""
    finite = [e for e in spec.bins if math.isfinite(e)]
    return (spec.bins[0] if math.isfinite(spec.bins[0]) else finite[0] - INFINITE_EDGE_SPAN,
            spec.bins[-1] if math.isfinite(spec.bins[-1]) else finite[-1] + INFINITE_EDGE_SPAN)


def sample_value(spec: AdapterSpec, level: int, rng: np.random.Generator) -> Any:
    """A value that :func:`~.reading.read_level` reads as ``level`` once reduced: a number within the level's
    interval, or one of the level's values. NotSampleable when no value gives it."""
    if spec.bins is None:
        values = [v for v, got in spec.level_of if got == level]
        if not values:
            raise NotSampleable(f"{spec.param}.levels: no value gives level {level}")
        return values[int(rng.integers(len(values)))]
    return float(_uniform(rng, *_finite(*_interval(spec, level))))


def write_sample(msg: Any, spec: AdapterSpec, level: int, rng: np.random.Generator, new_entry: NewEntry) -> None:
    """Set the fields of ``msg`` that ``spec`` reads so that it reads ``level`` (see the module docstring)."""
    if spec.scan_beams and spec.key_field is None:
        return _write_scan(msg, spec, level, rng)
    steps = parse_path(spec.field)
    if spec.key_field is not None:
        return _write_keyed(msg, spec, level, rng, new_entry)
    if spec.rep117 == "range":
        msg.min_range, msg.max_range = scan_limits(spec)
        msg.range = _limited_value(spec, level, rng, msg.min_range, msg.max_range)
        return
    if spec.rep117 == "beam":
        return _write_beam(msg, spec, level, rng, steps[0].index)
    if spec.type == LASER_SCAN:  # another field of a scan: the scan's geometry still has to be right
        _write_geometry(msg, SCAN_BEAMS)
    value = sample_value(spec, level, rng)
    parent, last = _parent(msg, steps, new_entry)
    current = getattr(parent, last.name)
    if spec.reduction == "norm" and not is_sequence(current) and last.index is None:
        names = message_fields(current)
        direction = rng.normal(size=len(names))
        for name, x in zip(names, abs(value) * direction / np.linalg.norm(direction)):
            setattr(current, name, float(x))
        return
    if spec.reduction is not None:  # a sequence: every entry read in the level's interval
        first, end = spec.index_range or (0, DEFAULT_SEQUENCE_LENGTH)
        lo, hi = bins_span(spec)
        values = _uniform(rng, lo, hi, max(end, DEFAULT_SEQUENCE_LENGTH))
        values[first:end] = _uniform(rng, *_finite(*_interval(spec, level)), end - first)
        return _set(parent, last.name, values.astype(np.float32))
    if last.index is None:
        return _set(parent, last.name, value)
    sequence = _grown(getattr(parent, last.name), last.index + 1)
    sequence[last.index] = value
    _set(parent, last.name, sequence)


def _set(msg: Any, name: str, value: Any) -> None:
    """``msg.name = value`` in the type the field holds (numpy arrays keep the field's dtype)."""
    current = getattr(msg, name)
    if isinstance(current, np.ndarray):
        value = np.asarray(value, dtype=current.dtype)
    elif isinstance(current, bool):
        value = bool(value)
    elif isinstance(current, (int, float, str)):
        value = type(current)(value)
    setattr(msg, name, value)


def _grown(sequence: Any, length: int) -> Any:
    """``sequence`` (a numpy array or a list of values) padded with zeros to at least ``length``."""
    if isinstance(sequence, np.ndarray):
        return np.concatenate([sequence, np.zeros(max(0, length - sequence.size), sequence.dtype)])
    return list(sequence) + [0.0] * max(0, length - len(sequence))


def _entry(parent: Any, step: Step, new_entry: NewEntry) -> list:
    """The entries of a sequence of messages that ``step`` ([i] or []) reads, made when missing."""
    sequence = list(getattr(parent, step.name))
    need = 1 if step.index == ALL else step.index + 1
    while len(sequence) < need:
        sequence.append(new_entry(parent, step.name))
    setattr(parent, step.name, sequence)
    return sequence if step.index == ALL else [sequence[step.index]]


def _parent(msg: Any, steps: tuple[Step, ...], new_entry: NewEntry) -> tuple[Any, Step]:
    """The message holding the last step, entries made on the way (the first entry of a [] step)."""
    for step in steps[:-1]:
        msg = getattr(msg, step.name) if step.index is None else _entry(msg, step, new_entry)[0]
    return msg, steps[-1]


def _write_keyed(msg: Any, spec: AdapterSpec, level: int, rng: np.random.Generator, new_entry: NewEntry) -> None:
    """One entry with ``key`` and the level's value among entries of other keys (``OTHER_KEY``)."""
    field, key = _explicit(parse_path(spec.field)), _explicit(parse_path(spec.key_field))
    last = max(k for k, s in enumerate(field) if s.index == ALL)
    containers = [msg]
    for step in field[:last]:  # the messages holding the last [] sequence: one entry of each [] step
        containers = [getattr(c, step.name) if step.index is None else _entry(c, step, new_entry)[0]
                      for c in containers]
    holder = containers[0]
    empty = spec.empty_value is not None and _reads_as(spec, spec.empty_value, level) and rng.random() < 0.3
    value = None if empty else sample_value(spec, level, rng)
    lo, hi = bins_span(spec) if spec.bins is not None else (0.0, 1.0)
    other = OTHER_KEY if isinstance(spec.key, str) else (not spec.key if isinstance(spec.key, bool) else spec.key + 1)
    if field[last].name == key[last].name:  # a sequence of messages: each entry holds its key and its value
        entries = _entry(holder, field[last], new_entry)
        if len(entries) < 2:
            entries.append(new_entry(holder, field[last].name))
            setattr(holder, field[last].name, entries)
        for k, entry in enumerate(entries):
            mine = k == len(entries) - 1 and not empty
            _set_path(entry, key[last + 1:], spec.key if mine else other)
            _set_path(entry, field[last + 1:], value if mine else float(_uniform(rng, lo, hi)))
        return
    keys = list(getattr(holder, key[last].name))  # parallel sequences (JointState's name and position)
    if OTHER_KEY not in keys and isinstance(spec.key, str):
        keys.append(OTHER_KEY)
    if spec.key not in keys and not empty:
        keys.append(spec.key)
    values = _grown(getattr(holder, field[last].name), len(keys))
    for k, name in enumerate(keys):
        if name == spec.key:
            values[k] = value
        elif name == OTHER_KEY:
            values[k] = float(_uniform(rng, lo, hi))
    _pad_parallel(holder, len(getattr(holder, key[last].name)), len(keys))
    setattr(holder, key[last].name, keys)
    _set(holder, field[last].name, values)


def _pad_parallel(holder: Any, old: int, new: int) -> None:
    """Sequences of ``holder`` that had ``old`` entries (parallel to the keys) grown to ``new`` with zeros."""
    for name in message_fields(holder):
        value = getattr(holder, name)
        if is_sequence(value) and old and len(value) == old:
            setattr(holder, name, _grown(value, new))


def _explicit(steps: tuple[Step, ...]) -> tuple[Step, ...]:
    """A path whose last step is a sequence of values without [] gets it."""
    if any(s.index == ALL for s in steps):
        return steps
    return steps[:-1] + (Step(steps[-1].name, ALL),)


def _set_path(msg: Any, steps: tuple[Step, ...], value: Any) -> None:
    for step in steps[:-1]:
        msg = getattr(msg, step.name)
    _set(msg, steps[-1].name, value)


def _reads_as(spec: AdapterSpec, value: float, level: int) -> bool:
    return spec.bins is not None and any(
        got == level and (lo <= value < hi or (k == len(spec.bin_levels) - 1 and value == hi))
        for k, (got, lo, hi) in enumerate(zip(spec.bin_levels, spec.bins, spec.bins[1:])))


def scan_limits(spec: AdapterSpec) -> tuple[float, float]:
    """range_min, range_max of a sample scan: the bins' finite span, from 0 at the lowest."""
    lo, hi = bins_span(spec)
    return max(lo, 0.0), hi


def _limited_value(spec: AdapterSpec, level: int, rng: np.random.Generator, low: float, high: float) -> float:
    """A Range's reading of ``level`` within the sensor's limits [low, high] (REP 117): +-inf where the level's
    interval lies beyond them, and sometimes where it is open on that side."""
    lo, hi = _interval(spec, level)
    if lo >= high or (math.isinf(hi) and rng.random() < INF_BEAM):
        return math.inf
    if hi <= low or (math.isinf(lo) and rng.random() < INF_BEAM):
        return -math.inf
    return float(_uniform(rng, max(lo, low), min(hi, high)))


def _write_geometry(scan: Any, count: int) -> None:
    """A full turn of ``count`` beams from -pi (float32, as a driver sends it)."""
    scan.angle_min, scan.angle_increment = float(np.float32(-math.pi)), float(np.float32(2 * math.pi / count))
    scan.angle_max = float(np.float32(scan.angle_min + (count - 1) * scan.angle_increment))


def _write_beam(scan: Any, spec: AdapterSpec, level: int, rng: np.random.Generator, index: int) -> None:
    """A full scan whose beam ``index`` reads ``level`` (REP 117, as a Range: +-inf where the level's interval lies
    beyond the limits, and sometimes where it is open on that side)."""
    count = max(SCAN_BEAMS, index + 1)
    _write_geometry(scan, count)
    scan.range_min, scan.range_max = scan_limits(spec)
    beams = _uniform(rng, scan.range_min, scan.range_max, count)
    beams[index] = _limited_value(spec, level, rng, scan.range_min, scan.range_max)
    _set(scan, "ranges", beams.astype(np.float32))


def _write_scan(scan: Any, spec: AdapterSpec, level: int, rng: np.random.Generator) -> None:
    """A full scan whose sector reads ``level`` (module docstring)."""
    low, high = scan_limits(spec)
    count = max(SCAN_BEAMS, spec.index_range[1] if spec.index_range else 0)
    _write_geometry(scan, count)
    scan.range_min, scan.range_max = low, high
    if spec.index_range is not None:
        sector = np.zeros(count, bool)
        sector[spec.index_range[0]:spec.index_range[1]] = True
    elif spec.angle_range is not None:
        sector = in_sector(beam_angles(scan, count), spec.angle_range)
    else:
        sector = np.ones(count, bool)
    lo, hi = _interval(spec, level)
    beams = _uniform(rng, low, high, count)
    n = int(sector.sum())
    if spec.rep117 and math.isinf(hi) and spec.reduction != "max" and rng.random() < INF_BEAM:
        lo = high  # the open last interval: sometimes no return at all in the sector
    if lo >= high:  # beyond range_max: no return in the sector
        beams[sector] = math.inf
    elif hi <= low:  # closer than range_min
        beams[sector] = -math.inf
    else:
        beams[sector] = _uniform(rng, max(lo, low), min(hi, high), n)
        if spec.rep117:
            draw = rng.random(n)
            values = beams[sector]
            if spec.reduction == "min" and math.isinf(hi):
                values[draw < INF_BEAM] = math.inf
            if spec.reduction == "max" and math.isinf(lo):
                values[draw < INF_BEAM] = -math.inf
            values[(draw >= INF_BEAM) & (draw < INF_BEAM + NAN_BEAM)] = math.nan
            values[(draw >= INF_BEAM + NAN_BEAM) & (draw < INF_BEAM + NAN_BEAM + FAR_BEAM)] = high + 1.0
            if not (np.isfinite(values) & (values <= high)).any():
                values[0] = _uniform(rng, max(lo, low), min(hi, high))
            beams[sector] = values
    _set(scan, spec.scan_beams, beams.astype(np.float32))
