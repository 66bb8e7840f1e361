"""The node's control adapters without ROS: each agent's ``controls.<factor>`` bindings (``adapters/controls.py``) as
:class:`ControlFeed` states, what became of their messages (the counts and the newest control /diagnostics shows), and
the stamp an adapted control is placed at on the agent's control timeline (``controls.py``).

A factor fed by an adapter takes its control from the adapter alone: the entry of a ``Controls`` message for that
factor is ignored (its other factors are used), so two sources never interleave on one factor. The stamp of an
adapted control is its message's ``header.stamp`` (TwistStamped, Odometry), judged as a ``Controls`` stamp is
(``admission.admit_stamp``: not a time, or too far ahead, is refused); a message without a header (Twist,
GoalStatusArray) or with a zero stamp is *unstamped* and moves the agent from its newest step on
(:func:`unstamped_control_ns`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

from ..adapters.controls import ControlSpec, GoalStatusSpec, factor_index_of
from .admission import REJECTING_WINDOW_S, being_rejected


def unstamped_control_ns(now_ns: int, last_step_ns: Optional[int]) -> int:
    """Where an unstamped control goes on an agent's timeline: 1 ns after the agent's newest step (``last_step_ns``),
    so it moves that step to the next, whenever it arrived; before the agent's first step, its arrival on the node
    clock (``now_ns``). Arrival order alone then decides, as for a command a robot obeys on receipt: under sim time
    a command and the next step's ``/clock`` can reach the node together, and their order there would otherwise move
    the command a step."""
    return int(now_ns) if last_step_ns is None else int(last_step_ns) + 1


def agent_topic(topic: str, prefix: str) -> str:
    """An adapter's topic as agent ``prefix`` (``<agent>/``, "" for a node's single agent) reads it: a relative topic
    under the prefix, an absolute (``/cmd_vel``) or private (``~/...``) one as it is."""
    return topic if topic.startswith(("/", "~")) else prefix + topic


@dataclass
class ControlFeed:
    """One agent's control adapter of one factor: ``name`` as /diagnostics lists it (``controls.<factor>``, with
    agents ``<agent>/controls.<factor>``), the topic it reads (relative to the node's namespace, under the agent's
    prefix), the message type, the factor's control labels; then the counts and the newest accepted control (an
    index, None before one) and refusal (its reason and detail). Times: ``time.monotonic()`` seconds, 0 = never."""

    name: str
    factor: str
    factor_index: int
    topic: str
    type: str
    labels: tuple[str, ...]
    received: int = 0
    accepted: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    last_control: Optional[int] = None
    last_reason: str = ""
    last_detail: str = ""
    last_accepted: float = 0.0
    last_rejected: float = 0.0

    def accept(self, control: int, now: float) -> None:
        self.accepted += 1
        self.last_control, self.last_accepted = int(control), now

    def refuse(self, reason: str, detail: str, now: float) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + 1
        self.last_reason, self.last_detail, self.last_rejected = reason, detail, now

    def rejecting(self, now: float, window_s: float = REJECTING_WINDOW_S) -> bool:
        """Its newest message was refused (within ``window_s``)."""
        return being_rejected(now, self.last_rejected, self.last_accepted, window_s)

    @property
    def control_label(self) -> str:
        """The newest accepted control's label ("" before one)."""
        return "" if self.last_control is None else self.labels[self.last_control]


def control_feeds(specs: Sequence[ControlSpec], prefix: str,
                  control_labels: Sequence[Sequence[str]]) -> dict[int, ControlFeed]:
    """One agent's feeds, by factor index: ``specs`` (checked bindings), ``prefix`` the agent's (``<agent>/`` or
    ""), ``control_labels`` each factor's (``adapters.controls.control_targets``)."""
    feeds = {}
    for spec in specs:
        f = factor_index_of(spec)
        factor = spec.factor if isinstance(spec, GoalStatusSpec) else spec.modality
        feeds[f] = ControlFeed(f"{prefix}{spec.param}", factor, f, agent_topic(spec.topic, prefix), spec.type,
                               tuple(str(x) for x in control_labels[f]))
    return feeds
