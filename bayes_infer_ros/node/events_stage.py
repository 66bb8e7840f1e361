"""The belief events' stage of the node's tick, without ROS: after each step, every stepping agent's beliefs go through
its :class:`~bayes_infer_ros.adapters.events.EventMonitor` (the ``events.<name>.*`` conditions, checked at
configure), and the events that fired are what the node publishes (``~/events`` and the latched ``~/events/<name>``).

One monitor per agent (agents' events are independent); a reset of an agent (``~/reset``, ``<agent>/reset``) turns its
True events False, each one an event stamped with the reset's time. A backwards jump of the clock keeps the values (the
monitor restarts a pending crossing). Shapes: a step's posterior is packed (S,) = the factors' beliefs (n_f,) in model
order.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import numpy as np

from ..adapters.events import Event, EventMonitor, EventSpec, event_targets, parse_events


def events_for_model(params: Mapping[str, Any], model: Any) -> dict[str, EventSpec]:
    """The ``events.*`` parameters (flat names) checked against ``model``'s factors and levels, by name;
    AdapterConfigError naming the first key that cannot be used."""
    return parse_events(params, *event_targets(model))


class EventsStage:
    """``specs``: the events (every agent has each); ``num_agents``; ``num_states``: the model's (n_f per factor)."""

    def __init__(self, specs: Sequence[EventSpec], num_agents: int, num_states: Sequence[int]):
        self.specs = tuple(specs)
        self.monitors = [EventMonitor(self.specs) for _ in range(int(num_agents))]
        self._bounds = np.cumsum([0, *(int(n) for n in num_states)])

    def __bool__(self) -> bool:
        return bool(self.specs)

    def step(self, k: int, posterior: np.ndarray, stamp_ns: int) -> list[Event]:
        """Agent ``k``'s step (beliefs ``posterior`` (S,), stamped ``stamp_ns``): the events whose value changed."""
        if not self.specs:
            return []
        beliefs = [posterior[lo:hi] for lo, hi in zip(self._bounds[:-1], self._bounds[1:])]
        return self.monitors[k].update(beliefs, stamp_ns)

    def reset(self, k: Optional[int], stamp_ns: int) -> list[tuple[int, Event]]:
        """Agent ``k``'s events (every agent's when None) back to False: (agent, event) for each that was True."""
        agents = range(len(self.monitors)) if k is None else (k,)
        return [(j, event) for j in agents for event in self.monitors[j].reset(stamp_ns)]

    def values(self, k: int) -> dict[str, bool]:
        """Agent ``k``'s events' values now, by name."""
        return self.monitors[k].values()
