"""Stamped controls on the node's time line (numpy only, no rclpy).

A ``bayes_infer_ros/Controls`` message says which control each factor applied from its ``header.stamp`` on.
The node keeps the recent ones, ordered by stamp, in a :class:`ControlTimeline`; the control of the transition
into a step stamped ``t`` is the newest control stamped strictly before ``t`` (a command holds until the next
one). So the controls of the transition k -> k+1 carry a stamp in ``[t_k, t_k+1)``, and arrival order does not
matter: a control that arrives after the observations of a later step still lands on its own transition, and
:func:`fill_window_actions` re-reads every transition of the VMP/MMP window at each tick.

An entry may set some factors only (a control adapter feeds one factor, ``controls.<factor>``; a ``Controls`` message
the factors no adapter feeds): the others keep the control in effect at its stamp, and a factor it sets holds in the
later entries until one of them sets that factor itself, whatever order they arrived in.

Shapes: ``F`` = factors; a control is an int32 ``(F,)`` array.
"""
from __future__ import annotations

import bisect
from typing import Optional, Sequence

import numpy as np

# Enough for a window of 1024 steps with a command per step; older ones are folded into ``held``.
DEFAULT_CAPACITY = 4096


class ControlTimeline:
    """Controls ordered by stamp (ns). ``held``: the control before the oldest kept one (zeros at start)."""

    def __init__(self, num_factors: int, capacity: int = DEFAULT_CAPACITY):
        self.num_factors = int(num_factors)
        self.capacity = int(capacity)
        self._stamps: list[int] = []
        self._controls: list[np.ndarray] = []
        self._sets: list[np.ndarray] = []  # per entry: (F,) bool, the factors it set itself
        self.held = np.zeros(self.num_factors, dtype=np.int32)

    def __len__(self) -> int:
        return len(self._stamps)

    def clear(self) -> None:
        self._stamps.clear()
        self._controls.clear()
        self._sets.clear()
        self.held = np.zeros(self.num_factors, dtype=np.int32)

    def add(self, stamp_ns: int, control: Sequence[int], factors: Optional[np.ndarray] = None) -> None:
        """Insert a control in stamp order; a second control with the same stamp replaces the first.

        ``factors`` (F,) bool: the factors this control sets (None: all); the others keep the control in effect at
        ``stamp_ns``, and each factor set holds in the later entries up to the first that sets it (module
        docstring)."""
        value = np.asarray(control, dtype=np.int32).reshape(self.num_factors)
        sets = np.ones(self.num_factors, bool) if factors is None else np.asarray(factors, bool).reshape(-1)
        stamp = int(stamp_ns)
        i = bisect.bisect_left(self._stamps, stamp)
        if i < len(self._stamps) and self._stamps[i] == stamp:
            merged = self._controls[i].copy()
            merged[sets] = value[sets]
            self._controls[i], self._sets[i] = merged, self._sets[i] | sets
        else:
            merged = (self._controls[i - 1] if i > 0 else self.held).copy()
            merged[sets] = value[sets]
            self._stamps.insert(i, stamp)
            self._controls.insert(i, merged)
            self._sets.insert(i, sets.copy())
        carry = sets.copy()
        for j in range(i + 1, len(self._stamps)):
            carry &= ~self._sets[j]
            if not carry.any():
                break
            later = self._controls[j].copy()
            later[carry] = value[carry]
            self._controls[j] = later
        while len(self._stamps) > self.capacity:
            self._stamps.pop(0)
            self._sets.pop(0)
            self.held = self._controls.pop(0)

    def at(self, stamp_ns: int) -> np.ndarray:
        """The control in effect just before ``stamp_ns``: the newest one stamped strictly earlier, else ``held``."""
        i = bisect.bisect_left(self._stamps, int(stamp_ns))
        return self._controls[i - 1] if i > 0 else self.held

    def latest(self) -> np.ndarray:
        """The newest control (what the next transition will use unless a later-stamped one arrives)."""
        return self._controls[-1] if self._controls else self.held

    def forget_before(self, stamp_ns: int) -> None:
        """Drop controls no transition after ``stamp_ns`` can use (the newest older one becomes ``held``)."""
        i = bisect.bisect_left(self._stamps, int(stamp_ns))
        if i > 1:
            self.held = self._controls[i - 2]
            del self._stamps[:i - 1]
            del self._controls[:i - 1]
            del self._sets[:i - 1]


def fill_window_actions(actions: np.ndarray, step_stamps: np.ndarray, valid_steps: int,
                        timeline: ControlTimeline) -> None:
    """Write the control of every real transition of a right-aligned window, in place.

    ``actions``: (T-1, F) int32, ``actions[j]`` moves step j to j+1; ``step_stamps``: (T,) int64 stamps of the
    window's steps; only the last ``valid_steps`` steps are real (padding transitions are left alone).
    """
    T = step_stamps.shape[0]
    for j in range(T - valid_steps, T - 1):
        actions[j] = timeline.at(int(step_stamps[j + 1]))


def check_controls(indices: Sequence[int], labels: Sequence[str], num_controls: Sequence[int],
                   control_labels: Optional[Sequence[Sequence[str]]]) -> tuple[Optional[np.ndarray], str]:
    """A Controls message's ``indices`` and optional ``labels`` -> int32 (F,), or (None, reason).

    ``indices`` empty and ``labels`` given: the indices are looked up from the labels. Both given: they must
    name the same controls.
    """
    F = len(num_controls)
    idx = [int(u) for u in indices]
    names = [str(x) for x in labels]
    if names and len(names) != F:
        return None, f"{len(names)} labels, the model has {F} factors (one control label per factor, or none)"
    if names and control_labels is None:
        return None, "labels given but the model has no control labels (model.B.<factor>.controls); send indices"
    if not idx and names:
        for f, name in enumerate(names):
            if name not in control_labels[f]:
                return None, f"factor {f}: unknown control label {name!r} (one of {list(control_labels[f])})"
            idx.append(list(control_labels[f]).index(name))
    if len(idx) != F:
        return None, f"{len(idx)} indices, the model has {F} factors (one control index per factor)"
    for f, (u, n) in enumerate(zip(idx, num_controls)):
        if not 0 <= u < int(n):
            return None, f"factor {f}: control {u} out of range 0..{int(n) - 1}"
    if names:
        for f, (u, name) in enumerate(zip(idx, names)):
            if control_labels[f][u] != name:
                return None, (f"factor {f}: index {u} is {control_labels[f][u]!r} but the label says {name!r}")
    return np.asarray(idx, dtype=np.int32), ""
