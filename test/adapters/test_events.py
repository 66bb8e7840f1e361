"""Belief events (``adapters/events.py``): ``events.<name>.*`` settings checked against the model's factors and
levels (refusals naming the key), and the state machine over each tick's beliefs and stamp: thresholds, hysteresis,
a minimum duration on the node's clock, a reset, several events on one factor, a clock that jumps back."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bayes_infer_ros.adapters.events import (Event, EventMonitor, EventState, check_events, event_targets,
                                             parse_events, reset_events, step_event, step_events)
from bayes_infer_ros.model import load_model

FACTORS = ["door", "battery"]
LEVELS = [["open", "closed"], ["low", "medium", "high"]]
S = 1_000_000_000  # ns per second


def specs(**events: dict):
    params = {f"events.{name}.{key}": value for name, keys in events.items() for key, value in keys.items()}
    return list(parse_events(params, FACTORS, LEVELS).values())


def run(monitor: EventMonitor, door_open: list[float], dt_s: float = 0.1, start_ns: int = 0):
    """Feed p(door = open) tick by tick (battery uniform); every event that fired, with the tick's index."""
    fired = []
    for k, p in enumerate(door_open):
        beliefs = [np.array([p, 1.0 - p]), np.full(3, 1 / 3)]
        for event in monitor.update(beliefs, start_ns + int(round(k * dt_s * S))):
            fired.append((k, event))
    return fired


# ---- the settings ---------------------------------------------------------------------------------------------
def test_an_event_reads_one_level_of_one_factor():
    (spec,) = specs(door_open={"factor": "door", "level": "open", "above": 0.9, "hysteresis": 0.1,
                               "min_duration": 0.5})
    assert (spec.name, spec.factor_index, spec.level, spec.level_label) == ("door_open", 0, 0, "open")
    assert (spec.above, spec.below, spec.hysteresis, spec.min_duration_ns) == (0.9, None, 0.1, S // 2)
    (spec,) = specs(low={"factor": "battery", "level": 0, "below": 0.2})
    assert (spec.factor_index, spec.level_label, spec.below, spec.hysteresis, spec.min_duration_ns) == \
        (1, "low", 0.2, 0.0, 0)


@pytest.mark.parametrize("name,keys,refusal", [
    ("e", {"level": "open", "above": 0.9}, "events.e.factor: required, one of the model's factors"),
    ("e", {"factor": "window", "level": "open", "above": 0.9}, "events.e.factor: required, one of the model's "
                                                               "factors ['door', 'battery'], got 'window'"),
    ("e", {"factor": "door", "above": 0.9}, "events.e.level: required, one of door's levels ['open', 'closed']"),
    ("e", {"factor": "door", "level": "ajar", "above": 0.9}, "events.e.level: 'ajar' is not a level of the factor "
                                                             "(labels ['open', 'closed'] or indices 0..1)"),
    ("e", {"factor": "door", "level": 2, "above": 0.9}, "events.e.level: level 2 is out of range"),
    ("e", {"factor": "door", "level": "open"}, "events.e: set either above"),
    ("e", {"factor": "door", "level": "open", "above": 0.9, "below": 0.1}, "events.e: set either above (p(open) > "
                                                                           "above) or below (p < below), not both"),
    ("e", {"factor": "door", "level": "open", "above": 1.0}, "events.e.above: 1: p(open) > 1 never holds"),
    ("e", {"factor": "door", "level": "open", "above": 1.5}, "events.e.above: expected a probability in [0, 1)"),
    ("e", {"factor": "door", "level": "open", "above": "high"}, "events.e.above: expected a probability"),
    ("e", {"factor": "door", "level": "open", "below": 0}, "events.e.below: 0: p(open) < 0 never holds"),
    ("e", {"factor": "door", "level": "open", "above": 0.3, "hysteresis": 0.5},
     "events.e.hysteresis: 0.5 puts the exit at p = -0.2, outside [0, 1]"),
    ("e", {"factor": "door", "level": "open", "below": 0.7, "hysteresis": 0.4},
     "events.e.hysteresis: 0.4 puts the exit at p = 1.1"),
    ("e", {"factor": "door", "level": "open", "above": 0.9, "hysteresis": -0.1}, "events.e.hysteresis: expected"),
    ("e", {"factor": "door", "level": "open", "above": 0.9, "min_duration": -1.0}, "events.e.min_duration: expected "
                                                                                   "seconds >= 0"),
    ("e", {"factor": "door", "level": "open", "above": 0.9, "min_duration": math.inf}, "events.e.min_duration"),
    ("e", {"factor": "door", "level": "open", "above": 0.9, "treshold": 0.5}, "events.e.treshold: unknown key"),
    ("e", {"factor": "door", "level": "open", "above": [0.9]}, "events.e.above: expected one string or number"),
    ("e", {"factor": "door", "level": "open", "above": {"p": 0.9}}, "events.e.above: expected one string or number"),
    ("door-open", {"factor": "door", "level": "open", "above": 0.9}, "events.door-open: an event's name is letters"),
])
def test_a_bad_event_is_refused_naming_its_key(name, keys, refusal):
    params = {f"events.{name}.{key}": value for key, value in keys.items()}
    checked = check_events(params, FACTORS, LEVELS)
    assert not checked.accepted and str(checked.refusals[0]).startswith(refusal), checked.refusals


def test_every_bad_event_at_once_and_the_good_ones_kept():
    params = {"events.a.factor": "door", "events.a.level": "open", "events.a.above": 0.9,
              "events.b.factor": "door", "events.b.level": "shut", "events.b.above": 0.9, "events.c": 1.0,
              "adapters.voltage.topic": "battery_state"}
    checked = check_events(params, FACTORS, LEVELS)
    assert list(checked.accepted) == ["a"] and [r.key for r in checked.refusals] == ["events.b.level", "events.c"]
    assert "factor" in checked.refusals[1].problem  # a bare name is told the keys an event takes


def test_the_events_of_the_shipped_model_check_against_its_levels(repo_root):
    names, labels = event_targets(load_model(repo_root / "config" / "agent.yaml"))
    assert names and all(labels)
    params = {"events.e.factor": names[0], "events.e.level": labels[0][-1], "events.e.below": 0.5}
    assert check_events(params, names, labels).ok


# ---- the state machine ----------------------------------------------------------------------------------------
def test_the_event_fires_on_the_tick_that_crosses_with_its_stamp():
    monitor = EventMonitor(specs(door_open={"factor": "door", "level": "open", "above": 0.9}))
    fired = run(monitor, [0.5, 0.8, 0.95, 0.97, 0.85, 0.9, 0.91])
    assert [(k, e.value, e.stamp_ns, e.confirmed_ns) for k, e in fired] == [
        (2, True, 2 * S // 10, 2 * S // 10), (4, False, 4 * S // 10, 4 * S // 10), (6, True, 6 * S // 10, 6 * S // 10)]
    assert fired[0][1] == Event("door_open", True, 2 * S // 10, 2 * S // 10, 0.95)
    assert monitor.values() == {"door_open": True}  # 0.9 is not above 0.9: the value at tick 5 was False


def test_hysteresis_keeps_a_hovering_belief_from_toggling():
    hovering = [0.5, 0.92, 0.89, 0.91, 0.86, 0.93, 0.84, 0.95]
    plain = run(EventMonitor(specs(e={"factor": "door", "level": "open", "above": 0.9})), hovering)
    banded = run(EventMonitor(specs(e={"factor": "door", "level": "open", "above": 0.9, "hysteresis": 0.05})),
                 hovering)
    assert [(k, e.value) for k, e in plain] == [(1, True), (2, False), (3, True), (4, False), (5, True), (6, False),
                                                (7, True)]
    assert [(k, e.value) for k, e in banded] == [(1, True), (6, False), (7, True)]  # left only at p <= 0.85


def test_below_with_hysteresis():
    monitor = EventMonitor(specs(shut={"factor": "door", "level": "open", "below": 0.1, "hysteresis": 0.1}))
    fired = run(monitor, [0.5, 0.09, 0.15, 0.19, 0.2, 0.05])
    assert [(k, e.value) for k, e in fired] == [(1, True), (4, False), (5, True)]


def test_a_minimum_duration_on_the_node_clock():
    """The condition must hold on every tick for 0.3 s from the first tick that crossed: the event carries that
    first tick's stamp and fires at the tick that completes the duration; a dip restarts it, and leaving obeys the
    same rule."""
    monitor = EventMonitor(specs(e={"factor": "door", "level": "open", "above": 0.9, "min_duration": 0.3}))
    p = [0.5, 0.95, 0.95, 0.5, 0.95, 0.95, 0.95, 0.95, 0.2, 0.95, 0.2, 0.2, 0.2, 0.2]
    fired = run(monitor, p)
    assert [(k, e.value, e.stamp_ns, e.confirmed_ns) for k, e in fired] == [
        (7, True, 4 * S // 10, 7 * S // 10), (13, False, 10 * S // 10, 13 * S // 10)]


def test_min_duration_is_measured_by_stamps_not_ticks():
    """Ticks 1 s apart: one tick after the crossing already covers 0.5 s; ticks 0.1 s apart need five more."""
    event = {"factor": "door", "level": "open", "above": 0.9, "min_duration": 0.5}
    slow = run(EventMonitor(specs(e=event)), [0.5, 0.95, 0.95], dt_s=1.0)
    fast = run(EventMonitor(specs(e=event)), [0.5] + [0.95] * 7, dt_s=0.1)
    assert [(k, e.stamp_ns) for k, e in slow] == [(2, S)]
    assert [(k, e.stamp_ns, e.confirmed_ns) for k, e in fast] == [(6, S // 10, 6 * S // 10)]


def test_several_events_on_one_factor_are_independent():
    monitor = EventMonitor(specs(likely_open={"factor": "door", "level": "open", "above": 0.6},
                                 surely_open={"factor": "door", "level": "open", "above": 0.95, "min_duration": 0.2},
                                 surely_shut={"factor": "door", "level": "closed", "above": 0.95},
                                 battery_low={"factor": "battery", "level": "low", "above": 0.5}))
    fired = run(monitor, [0.5, 0.7, 0.97, 0.98, 0.99, 0.3, 0.02, 0.02])
    # surely_open leaves as it entered: after 0.2 s of p(open) <= 0.95 (ticks 5 to 7)
    assert [(k, e.name, e.value) for k, e in fired] == [
        (1, "likely_open", True), (4, "surely_open", True), (5, "likely_open", False), (6, "surely_shut", True),
        (7, "surely_open", False)]
    assert monitor.values() == {"battery_low": False, "likely_open": False, "surely_open": False,
                                "surely_shut": True}


def test_a_reset_turns_every_true_event_false_once_and_clears_pending_crossings():
    monitor = EventMonitor(specs(a={"factor": "door", "level": "open", "above": 0.9},
                                 b={"factor": "door", "level": "open", "above": 0.9, "min_duration": 0.3},
                                 c={"factor": "door", "level": "closed", "above": 0.5}))
    run(monitor, [0.95, 0.95])  # a: True; b: pending since 0; c: False
    assert monitor.values() == {"a": True, "b": False, "c": False}
    (event,) = monitor.reset(5 * S)
    assert (event.name, event.value, event.stamp_ns, event.confirmed_ns) == ("a", False, 5 * S, 5 * S)
    assert math.isnan(event.probability) and monitor.reset(6 * S) == []
    fired = run(monitor, [0.95, 0.95, 0.95, 0.95], start_ns=10 * S)  # b's pending crossing did not survive
    assert [(k, e.name) for k, e in fired] == [(0, "a"), (3, "b")]


def test_a_clock_that_jumps_back_restarts_a_pending_crossing_and_keeps_the_value():
    (spec,) = specs(e={"factor": "door", "level": "open", "above": 0.9, "min_duration": 1.0})
    state, event = step_event(spec, EventState(), 0.95, 10 * S)
    assert event is None and state.pending_since == 10 * S
    state, event = step_event(spec, state, 0.95, 2 * S)  # a bag looped: 2 s < 10 s
    assert event is None and state.pending_since == 2 * S
    state, event = step_event(spec, state, 0.95, 3 * S)
    assert event is not None and (event.value, event.stamp_ns, event.confirmed_ns) == (True, 2 * S, 3 * S)
    state, event = step_event(spec, state, 0.95, 0)  # back again: the value stays
    assert event is None and state.value


def test_nan_neither_enters_nor_leaves():
    (spec,) = specs(e={"factor": "door", "level": "open", "above": 0.9, "min_duration": 0.2})
    state, _ = step_event(spec, EventState(), 0.95, 0)
    state, event = step_event(spec, state, math.nan, S // 10)
    assert event is None and state.pending_since is None and not state.value
    state = EventState(value=True)
    state, event = step_event(spec, state, math.nan, S)
    assert event is None and state.value


def test_step_events_is_pure_and_checks_the_beliefs_shape():
    spec_list = specs(a={"factor": "battery", "level": "high", "above": 0.5})
    states = (EventState(),)
    beliefs = [np.array([0.5, 0.5]), np.array([0.1, 0.1, 0.8])]
    first = step_events(spec_list, states, beliefs, 0)
    assert first == step_events(spec_list, states, beliefs, 0) and states == (EventState(),)
    assert [e.name for e in first[1]] == ["a"]
    with pytest.raises(ValueError, match="events.a: the belief of factor battery has shape"):
        step_events(spec_list, states, [np.array([0.5, 0.5]), np.array([0.5, 0.5])], 0)
    states, (event,) = reset_events(spec_list, first[0], 7)
    assert states == (EventState(),) and (event.name, event.value, event.stamp_ns) == ("a", False, 7)


# ---- a property: against a plain re-statement of the rule ------------------------------------------------------
def reference(probabilities, stamps, above, hysteresis, min_duration_ns):
    """The events by the rule as written in the module docstring, tick by tick (no state object): each tick's value
    is the previous one flipped when every tick since some tick t0 (stamps within [t0, now], now - t0 >= the
    duration) was a crossing."""
    value, out, run_start = False, [], None
    for p, stamp in zip(probabilities, stamps):
        crossing = (p <= above - hysteresis) if value else (p > above)
        run_start = (run_start if run_start is not None else stamp) if crossing else None
        if crossing and stamp - run_start >= min_duration_ns:
            value = not value
            out.append((value, run_start, stamp))
            run_start = None
    return out


@settings(max_examples=200, derandomize=True, deadline=None, database=None)
@given(p=st.lists(st.sampled_from([0.0, 0.5, 0.84, 0.85, 0.86, 0.9, 0.91, 1.0]), max_size=30),
       gaps=st.lists(st.integers(0, 3), min_size=30, max_size=30), hysteresis=st.sampled_from([0.0, 0.05]),
       duration=st.sampled_from([0, 1, 2, 5]))
def test_the_state_machine_follows_the_rule(p, gaps, hysteresis, duration):
    stamps = list(np.cumsum(gaps[:len(p)]) * S)
    (spec,) = specs(e={"factor": "door", "level": "open", "above": 0.9, "hysteresis": hysteresis,
                       "min_duration": float(duration)})
    monitor = EventMonitor([spec])
    got = []
    for prob, stamp in zip(p, stamps):
        got += [(e.value, e.stamp_ns, e.confirmed_ns) for e in monitor.update([np.array([prob, 1 - prob]),
                                                                                np.full(3, 1 / 3)], int(stamp))]
    assert got == reference(p, stamps, 0.9, hysteresis, duration * S)
