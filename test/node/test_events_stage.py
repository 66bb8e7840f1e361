"""node/events_stage.py: each agent's belief events over its packed posteriors (the factors' beliefs in model order),
independent of the other agents'; a reset of one agent (or all) turns its True events False, one event each, stamped
with the reset's time; the events are checked against the model at configure, naming the key."""
from __future__ import annotations

import math

import numpy as np
import pytest

from bayes_infer_ros.adapters import AdapterConfigError, EventSpec
from bayes_infer_ros.node.events_stage import EventsStage, events_for_model

S = 1_000_000_000
OPEN = EventSpec("door_open", "door", 1, 1, "open", above=0.8, below=None)


def _posterior(p_open: float) -> np.ndarray:
    """location (3 levels), door (closed, open) packed."""
    return np.array([0.2, 0.3, 0.5, 1 - p_open, p_open])


def test_each_agent_fires_on_its_own_beliefs_and_a_reset_clears_only_its_events():
    stage = EventsStage([OPEN], 2, (3, 2))
    assert stage.step(0, _posterior(0.9), 1 * S)[0].value is True
    assert stage.step(1, _posterior(0.5), 1 * S) == []
    fired = stage.step(0, _posterior(0.7), 2 * S)
    assert [(e.name, e.value, e.stamp_ns) for e in fired] == [("door_open", False, 2 * S)]
    stage.step(0, _posterior(0.95), 3 * S)
    stage.step(1, _posterior(0.95), 3 * S)
    assert stage.values(0) == stage.values(1) == {"door_open": True}
    [(k, event)] = stage.reset(1, 4 * S)
    assert k == 1 and not event.value and event.stamp_ns == 4 * S and math.isnan(event.probability)
    assert stage.values(0) == {"door_open": True} and stage.values(1) == {"door_open": False}
    assert [k for k, _ in stage.reset(None, 5 * S)] == [0]  # agent 1 was already False
    assert not EventsStage((), 1, (3, 2)) and EventsStage((), 1, (3, 2)).step(0, _posterior(1.0), S) == []


def test_the_events_are_checked_against_the_model_naming_the_key(repo_root):
    from bayes_infer_ros.model import load_model

    model = load_model(repo_root / "config" / "robot.yaml")
    specs = events_for_model({"events.door_open.factor": "door", "events.door_open.level": "open",
                              "events.door_open.above": 0.8}, model)
    assert specs["door_open"].factor_index == model.factor_names.index("door")
    with pytest.raises(AdapterConfigError, match=r"^events.door_open.level: 'ajar' is not a level"):
        events_for_model({"events.door_open.factor": "door", "events.door_open.level": "ajar",
                          "events.door_open.above": 0.8}, model)
