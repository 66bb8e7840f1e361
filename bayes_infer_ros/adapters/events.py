"""Belief events (pure: numpy, no rclpy): ``events.<name>.*`` settings, a condition on one level's probability of a
factor's belief, checked by the adapters' checker (``check.py``) into one frozen :class:`EventSpec` each, and the
state machine that turns each tick's beliefs into the events that fired.

Parameters (``events.<name>.<key>``; ``<name>``: letters, digits and ``_``, starting with a letter, as it names a
topic):

- ``factor`` (required): a factor of the model; ``level`` (required): one of its levels, by label or index.
- ``above`` or ``below`` (one of them): the condition is ``p(level) > above`` (``above`` in [0, 1)), or
  ``p(level) < below`` (``below`` in (0, 1]).
- ``hysteresis`` (default 0.0, >= 0): once met, the condition is left only when ``p(level) <= above - hysteresis``
  (``>= below + hysteresis``), so a belief hovering at the threshold does not toggle it. The exit threshold stays
  within [0, 1]. With 0.0, ``p <= above`` leaves it.
- ``min_duration`` (seconds of the node's clock, default 0.0, >= 0): the condition (or its exit) must hold on every
  tick for at least this long, from the first tick that crossed, before the event's value changes.

The value of an event is whether its condition is met: False before the first tick and after a reset. Each tick
(:func:`step_events`, or :class:`EventMonitor` holding the states) takes the beliefs of every factor and the
tick's stamp, and returns an :class:`Event` for each event whose value changed: its name, the new value, the stamp of
the tick that crossed the threshold (``stamp_ns``; with ``min_duration``, the first tick of the run that lasted long
enough) and of the tick where the value changed (``confirmed_ns``). A tick whose probability is in the hysteresis
band, or NaN, neither enters nor leaves: a pending crossing restarts. A stamp older than the previous tick's (the
clock jumped back: a bag looped, a simulation restarted) restarts a pending crossing at that tick; the value is kept.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from .check import Checked, check_group
from .config import AdapterConfigError, as_number, level_index, shown

PREFIX = "events."
KEYS = ("factor", "level", "above", "below", "hysteresis", "min_duration")
# The longest min_duration (seconds): a year; beyond it a duration is a mistake, and its nanoseconds stay an int64.
MAX_DURATION_S = 365 * 24 * 3600.0
PARAMETER_HELP = (
    ("factor", "string, required: the factor whose belief the condition reads"),
    ("level", "required: one of the factor's levels (label or index)"),
    ("above", "the condition is p(level) > above (a probability in [0, 1)); set above or below"),
    ("below", "the condition is p(level) < below (a probability in (0, 1])"),
    ("hysteresis", ">= 0, default 0.0: the condition is left only at p <= above - hysteresis (p >= below + "
                   "hysteresis)"),
    ("min_duration", "seconds of the node's clock, >= 0, default 0.0: how long the condition (or its exit) must hold "
                     "before the event's value changes"),
)
assert tuple(k for k, _ in PARAMETER_HELP) == KEYS


@dataclass(frozen=True)
class EventSpec:
    """One event: ``factor`` (``factor_index``), the level read (``level``, its label ``level_label``), the
    condition (``above`` or ``below``: the other is None), ``hysteresis`` and ``min_duration_ns``."""

    name: str
    factor: str
    factor_index: int
    level: int
    level_label: str
    above: Optional[float]
    below: Optional[float]
    hysteresis: float = 0.0
    min_duration_ns: int = 0

    @property
    def param(self) -> str:
        return f"{PREFIX}{self.name}"

    def enters(self, p: float) -> bool:
        """The condition is met at probability ``p`` (False for NaN)."""
        return p > self.above if self.above is not None else p < self.below

    def leaves(self, p: float) -> bool:
        """Once met, the condition is left at ``p`` (False for NaN and within the hysteresis band)."""
        if self.above is not None:
            return p <= self.above - self.hysteresis
        return p >= self.below + self.hysteresis


def event_targets(model: Any) -> tuple[list[str], list[list[str]]]:
    """(factor names, state labels of each factor) of a GenerativeModel."""
    return ([model.factor_name(f) for f in range(model.num_factors)],
            [model.state_label_list(f) for f in range(model.num_factors)])


# ---- the settings --------------------------------------------------------------------------------------------
def _probability(root: str, keys: Mapping[str, Any], key: str, low: float, high: float, what: str) -> float:
    value = as_number(keys[key])
    if value is None or not low <= value <= high:
        raise AdapterConfigError(f"{root}.{key}: expected {what}, got {shown(keys[key])}")
    return value


def parse_event(name: str, keys: Mapping[str, Any], factor_names: Sequence[str],
                state_labels: Sequence[Sequence[str]]) -> EventSpec:
    """One ``events.<name>.*`` group (keys without the prefix) -> its spec; AdapterConfigError naming the first key
    that cannot be used."""
    root = f"{PREFIX}{name}"
    if not (name[:1].isascii() and name[:1].isalpha() and name.isascii() and name.replace("_", "a").isalnum()):
        raise AdapterConfigError(f"{root}: an event's name is letters, digits and _, starting with a letter (it names "
                                 f"the topic ~/events/<name>), got {name!r}")
    for key, value in keys.items():
        if key not in KEYS:
            raise AdapterConfigError(f"{root}.{key}: unknown key (expected one of {list(KEYS)})")
        if not isinstance(value, (int, float, str)):
            raise AdapterConfigError(f"{root}.{key}: expected one string or number, got {shown(value)}")
    factor = keys.get("factor")
    if factor not in factor_names:
        raise AdapterConfigError(f"{root}.factor: required, one of the model's factors {list(factor_names)}, got "
                                 f"{shown(factor)}")
    f = list(factor_names).index(factor)
    labels = [str(x) for x in state_labels[f]]
    if "level" not in keys:
        raise AdapterConfigError(f"{root}.level: required, one of {factor}'s levels {labels} (or its index)")
    level = level_index(keys["level"], labels, f"{root}.level")
    if ("above" in keys) == ("below" in keys):
        raise AdapterConfigError(f"{root}: set either above (p({labels[level]}) > above) or below (p < below), "
                                 f"{'not both' if 'above' in keys else 'one of them'}")
    above = below = None
    if "above" in keys:
        above = _probability(root, keys, "above", 0.0, 1.0, "a probability in [0, 1) (p > 1 never holds)")
        if above >= 1.0:
            raise AdapterConfigError(f"{root}.above: {above:g}: p({labels[level]}) > {above:g} never holds; expected "
                                     "a probability in [0, 1)")
    else:
        below = _probability(root, keys, "below", 0.0, 1.0, "a probability in (0, 1] (p < 0 never holds)")
        if below <= 0.0:
            raise AdapterConfigError(f"{root}.below: {below:g}: p({labels[level]}) < {below:g} never holds; expected "
                                     "a probability in (0, 1]")
    hysteresis = 0.0
    if "hysteresis" in keys:
        hysteresis = _probability(root, keys, "hysteresis", 0.0, 1.0, "a probability difference >= 0")
        exit_at = above - hysteresis if above is not None else below + hysteresis
        if not 0.0 <= exit_at <= 1.0:
            raise AdapterConfigError(f"{root}.hysteresis: {hysteresis:g} puts the exit at p = {exit_at:g}, outside "
                                     "[0, 1]: the event would never clear")
    min_duration_ns = 0
    if "min_duration" in keys:
        seconds = as_number(keys["min_duration"])
        if seconds is None or not 0.0 <= seconds <= MAX_DURATION_S:
            raise AdapterConfigError(f"{root}.min_duration: expected seconds >= 0 (at most {MAX_DURATION_S:g}), got "
                                     f"{shown(keys['min_duration'])}")
        min_duration_ns = int(round(seconds * 1e9))
    return EventSpec(name, factor, f, level, labels[level], above, below, hysteresis, min_duration_ns)


def check_events(params: Mapping[str, Any], factor_names: Sequence[str],
                 state_labels: Sequence[Sequence[str]]) -> Checked[EventSpec]:
    """Every ``events.*`` parameter of ``params`` (flat ROS names -> values) for a model with these factors and
    state labels. Never raises."""
    return check_group(params, PREFIX, lambda name, keys: parse_event(name, keys, factor_names, state_labels), KEYS)


def parse_events(params: Mapping[str, Any], factor_names: Sequence[str],
                 state_labels: Sequence[Sequence[str]]) -> dict[str, EventSpec]:
    """Every event in ``params``, by name; AdapterConfigError with the first refusal."""
    return check_events(params, factor_names, state_labels).raise_first()


# ---- the state machine ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Event:
    """An event whose value changed: ``value`` (the condition is met), ``stamp_ns`` (the tick that crossed the
    threshold) and ``confirmed_ns`` (the tick at which the value changed: ``stamp_ns`` + at least min_duration), and
    the level's probability at that tick (``probability``)."""

    name: str
    value: bool
    stamp_ns: int
    confirmed_ns: int
    probability: float


@dataclass(frozen=True)
class EventState:
    """One event between ticks: its ``value``, the stamp of the first tick of a pending crossing (None: none), and
    the previous tick's stamp (None: no tick yet)."""

    value: bool = False
    pending_since: Optional[int] = None
    last_stamp: Optional[int] = None


def step_event(spec: EventSpec, state: EventState, probability: float,
               stamp_ns: int) -> tuple[EventState, Optional[Event]]:
    """One tick of one event: the next state, and the Event when the value changed (the module docstring)."""
    stamp_ns = int(stamp_ns)
    pending = state.pending_since
    if state.last_stamp is not None and stamp_ns < state.last_stamp:
        pending = None  # the clock jumped back: a duration cannot be measured across it
    crossing = spec.leaves(probability) if state.value else spec.enters(probability)
    if not crossing:
        return EventState(state.value, None, stamp_ns), None
    since = stamp_ns if pending is None else pending
    if stamp_ns - since < spec.min_duration_ns:
        return EventState(state.value, since, stamp_ns), None
    value = not state.value
    return EventState(value, None, stamp_ns), Event(spec.name, value, since, stamp_ns, float(probability))


def step_events(specs: Sequence[EventSpec], states: Sequence[EventState], beliefs: Sequence[np.ndarray],
                stamp_ns: int) -> tuple[tuple[EventState, ...], list[Event]]:
    """One tick of every event: ``beliefs`` is the tick's posterior, one (S_f,) array per factor (model order);
    returns the next states (one per spec) and the events that fired, in ``specs``' order. ValueError when a belief
    has no entry for an event's level."""
    out_states, events = [], []
    for spec, state in zip(specs, states, strict=True):
        belief = np.asarray(beliefs[spec.factor_index])
        if belief.ndim != 1 or not 0 <= spec.level < belief.shape[0]:
            raise ValueError(f"{spec.param}: the belief of factor {spec.factor} has shape {belief.shape}, no level "
                             f"{spec.level}")
        state, event = step_event(spec, state, float(belief[spec.level]), stamp_ns)
        out_states.append(state)
        if event is not None:
            events.append(event)
    return tuple(out_states), events


def reset_events(specs: Sequence[EventSpec], states: Sequence[EventState],
                 stamp_ns: int) -> tuple[tuple[EventState, ...], list[Event]]:
    """Every event back to its start (False, nothing pending): the states, and a False event (stamped
    ``stamp_ns``, probability NaN) for each event that was True, so that a subscriber hears it."""
    events = [Event(spec.name, False, int(stamp_ns), int(stamp_ns), math.nan)
              for spec, state in zip(specs, states, strict=True) if state.value]
    return tuple(EventState() for _ in specs), events


class EventMonitor:
    """The events of one agent and their states, for a caller that keeps no state of its own: :meth:`update` each
    tick, :meth:`reset` when the beliefs are reset."""

    def __init__(self, specs: Sequence[EventSpec]):
        self.specs = tuple(specs)
        self.states: tuple[EventState, ...] = tuple(EventState() for _ in self.specs)

    def update(self, beliefs: Sequence[np.ndarray], stamp_ns: int) -> list[Event]:
        self.states, events = step_events(self.specs, self.states, beliefs, stamp_ns)
        return events

    def reset(self, stamp_ns: int) -> list[Event]:
        self.states, events = reset_events(self.specs, self.states, stamp_ns)
        return events

    def values(self) -> dict[str, bool]:
        """Each event's value now, by name (what a boolean topic per event holds)."""
        return {spec.name: state.value for spec, state in zip(self.specs, self.states)}
