"""The tick's semantics, once: what the node runs each tick and what the offline golden path replays.

A :class:`BeliefFilter` wraps a built engine (an :class:`~.api.Engine`) and keeps the state between steps:

- **fpi** carries the prior: ``q_t = fpi(o_t, prior_t)`` with ``prior_0 = D`` and
  ``prior_{t+1} = predict(q_t, a_t)`` (pymdp's ``compute_expected_state``; ``a_t`` is the control taken between
  step t and t+1). With transitions B, one engine dispatch (``engine.tick``) returns the beliefs and the prior
  under the control expected next (``upcoming``); the next step uses it when its control is that one, and
  predicts again otherwise. Without B the prior is the previous posterior.
- **vmp / mmp** infer over a fixed window (:class:`SequenceWindow`) of the last ``horizon`` steps with the
  controls between them and the prior D at the window's first step; the step's belief is the window's last row.
  One fixed window length means one compiled program: padding rows are masked with ``valid_steps``.
- **reset** forgets everything (the next step starts from D); **swap** installs another engine, keeping the
  window (resized when the horizon changes) and dropping the carried prior when the algorithm changes.

Every step is recorded in the window whatever the algorithm, so a switch from fpi to vmp starts with history.

**A modality without an observation is no evidence**: its part of the row is all zero (:func:`no_evidence`).
pymdp 1.0.4's likelihood is ``xlogy(o, A).sum(0)`` = sum_o o[o] log A[o, ...] (log A clipped at MINVAL, so finite):
an all-zero ``o`` adds exactly 0, in every variant (all are linear in ``o``) and at every step of a window. A
uniform ``o`` would add the mean of log A over levels, which differs between states: it is evidence. With no
observation at all, an fpi step returns its prior (softmax(log prior)). An observation a sender gives explicitly
(a ``probabilities`` vector, uniform or not) is used as given.
Shapes: packed observations ``(O,)`` with ``O = sum m_i``, packed states ``(S,)`` with ``S = sum n_f``,
controls ``(F,)`` int. Pure numpy plus the engine: no ROS.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from .api import Engine


def no_evidence(num_levels: int, dtype: Any = np.float32) -> np.ndarray:
    """The observation (m,) of a modality that has none: all zero, so ``xlogy(o, A)`` adds nothing to the
    likelihood (see the module docstring)."""
    return np.zeros(num_levels, dtype=dtype)


class SequenceWindow:
    """The fixed-size VMP/MMP window (right-aligned; only the last ``valid_steps`` rows are real).

    ``obs``: (T, O), ``actions``: (T-1, F) int32 where ``actions[t]`` moved step t to t+1, ``stamps``: (T,) int64
    (-1 on padding), ``valid_steps`` in 0..T. Padding rows hold no evidence (all zero, and masked by
    ``valid_steps`` anyway) and action 0.
    """

    def __init__(self, horizon: int, num_obs: Sequence[int], num_factors: int, dtype: Any = np.float32):
        if horizon < 1:
            raise ValueError(f"horizon: expected >= 1, got {horizon}")
        self.horizon = int(horizon)
        self.num_obs = tuple(int(m) for m in num_obs)
        self.num_factors = int(num_factors)
        self.dtype = np.dtype(dtype)
        self._pad_row = np.concatenate([no_evidence(m, self.dtype) for m in self.num_obs])
        self.obs = np.tile(self._pad_row, (self.horizon, 1))
        self.last_row = self.obs[-1]  # a view: the newest step's observation row (O,), written in place by push
        self.actions = np.zeros((max(self.horizon - 1, 0), self.num_factors), dtype=np.int32)
        self.stamps = np.full(self.horizon, -1, dtype=np.int64)
        self.valid_steps = 0

    def clear(self) -> None:
        self.obs[:] = self._pad_row
        self.actions[:] = 0
        self.stamps[:] = -1
        self.valid_steps = 0

    def push(self, obs_row: np.ndarray, action: Optional[Sequence[int]] = None, stamp_ns: int = -1) -> None:
        """Append one step stamped ``stamp_ns``; ``action`` (F,) is the control that led from the previous step
        to this one (None: 0)."""
        self.obs[:-1] = self.obs[1:]
        self.last_row[:] = obs_row
        self.stamps[:-1] = self.stamps[1:]
        self.stamps[-1] = int(stamp_ns)
        if self.horizon > 1:
            self.actions[:-1] = self.actions[1:]
            self.actions[-1] = 0 if action is None else np.asarray(action, dtype=np.int32)
        self.valid_steps = min(self.valid_steps + 1, self.horizon)

    def resized(self, horizon: int) -> "SequenceWindow":
        """A window of another length holding the newest min(old, new) real steps."""
        new = SequenceWindow(horizon, self.num_obs, self.num_factors, self.dtype)
        keep = min(self.valid_steps, new.horizon)
        if keep:
            new.obs[-keep:] = self.obs[-keep:]
            new.stamps[-keep:] = self.stamps[-keep:]
            if keep > 1:
                new.actions[-(keep - 1):] = self.actions[-(keep - 1):]
            new.valid_steps = keep
        return new


class BeliefFilter:
    """Beliefs step by step over one model (see the module docstring).

    ``engine``: a built engine whose ``algorithm`` is fpi, vmp or mmp; ``D``: the initial prior, one (n_f,) array
    per factor; ``horizon``: the vmp/mmp window length (also kept under fpi); ``has_B``: the model has transitions.
    """

    def __init__(self, engine: Engine, D: Sequence[np.ndarray], horizon: int, has_B: bool, dtype: Any = np.float32):
        self.dtype = np.dtype(dtype)
        self.has_B = bool(has_B)
        self._D = np.concatenate([np.asarray(d, dtype=self.dtype) for d in D])
        self._bind(engine)
        layout = engine.layout
        self.window = SequenceWindow(max(int(horizon), 1), layout.num_obs, len(layout.num_states), self.dtype)
        self._last_q: Optional[np.ndarray] = None
        self._no_control = np.zeros(len(layout.num_states), np.int32)
        # (control as int32 bytes, engine, prior): the prior the last fpi dispatch predicted under that control
        self._next_prior: Optional[tuple[bytes, Any, np.ndarray]] = None

    # ---- state -----------------------------------------------------------------------------------
    @property
    def engine(self) -> Any:
        return self._engine

    @property
    def algorithm(self) -> str:
        return self._engine.algorithm

    @property
    def D(self) -> np.ndarray:
        """The initial prior, packed (S,)."""
        return self._D

    @property
    def last_beliefs(self) -> Optional[np.ndarray]:
        """The newest posterior (S,), None before the first step and after a reset."""
        return self._last_q

    @property
    def empty(self) -> bool:
        """No step recorded since construction or the last reset."""
        return self.window.valid_steps == 0

    def reset(self) -> None:
        """Forget every step: the next one starts from D with an empty window."""
        self.window.clear()
        self._last_q = None
        self._next_prior = None

    def swap(self, engine: Engine, horizon: int) -> None:
        """Run ``engine`` from the next step on (same model structure). The window is kept, resized to
        ``horizon``; the carried fpi prior is dropped when the algorithm changes."""
        if engine.algorithm != self._engine.algorithm:
            self._next_prior = None
        self._bind(engine)
        if int(horizon) != self.window.horizon:
            self.window = self.window.resized(max(int(horizon), 1))

    # ---- one step --------------------------------------------------------------------------------
    def record(self, obs_row: np.ndarray, action: Optional[Sequence[int]], stamp_ns: int = -1) -> None:
        """Append a step to the window: ``obs_row`` (O,), ``action`` (F,) the control taken since the previous step
        (ignored for the first step after a reset). Either of another length is refused (ValueError naming it)."""
        row = np.asarray(obs_row)
        if row.shape != self.window.last_row.shape:
            raise ValueError(f"obs_row: expected shape {self.window.last_row.shape} (the packed observation), got "
                             f"{row.shape}")
        self.window.push(row, None if self.empty else self._control(action), stamp_ns)

    def infer(self, action: Optional[Sequence[int]] = None, upcoming: Optional[Sequence[int]] = None) -> np.ndarray:
        """Beliefs (S,) of the step :meth:`record` added. fpi: ``action`` is the control taken since the previous
        step; ``upcoming`` the control expected before the next one (default: ``action``). vmp/mmp read the
        window (whose ``actions`` the caller may have corrected). On an exception nothing changes but the window."""
        engine = self._engine
        if engine.algorithm == "fpi":
            control = self._control(action)
            prior = self._D if self._last_q is None else self._prior_for(control)
            if self.has_B:
                nxt_action = control if upcoming is None or upcoming is action else self._control(upcoming)
                if self._tick_prepared is not None:  # the row, prior and control are already in the kernel's form
                    posterior, nxt = self._tick_prepared(self.window.last_row, prior, nxt_action)
                else:
                    q, nxt = engine.tick(self.window.last_row, prior, nxt_action)
                    posterior, nxt = np.asarray(q, dtype=self.dtype), np.asarray(nxt, dtype=self.dtype)
                self._next_prior = (nxt_action.tobytes(), engine, nxt)
            else:
                posterior = np.asarray(engine.run_packed(self.window.last_row, prior), dtype=self.dtype)
                self._next_prior = None  # predicted from the previous posterior: stale now
        else:
            out = engine.run_packed(self.window.obs, self._D, self.window.actions, valid_steps=self.window.valid_steps)
            posterior = np.asarray(out, dtype=self.dtype)[-1]
            self._next_prior = None
        self._last_q = posterior
        return posterior

    def step(self, obs_row: np.ndarray, action: Optional[Sequence[int]] = None,
             upcoming: Optional[Sequence[int]] = None, stamp_ns: int = -1) -> np.ndarray:
        """:meth:`record` then :meth:`infer`: the beliefs (S,) after observing ``obs_row``."""
        self.record(obs_row, action, stamp_ns)
        return self.infer(action, upcoming)

    def _prior_for(self, control: np.ndarray) -> np.ndarray:
        """The prior of this fpi step: the one the last dispatch predicted when ``control`` (F,) int32 is the
        control it assumed, a fresh prediction from the last posterior otherwise."""
        key = control.tobytes()
        cached = self._next_prior
        if cached is not None and cached[0] == key and cached[1] is self._engine:
            return cached[2]
        engine = self._engine
        q = engine.layout.unpack_states(self._last_q)
        prior = np.concatenate([np.asarray(x, dtype=self.dtype) for x in engine.predict(q, control)])
        self._next_prior = (key, engine, prior)
        return prior

    def _control(self, action: Optional[Sequence[int]]) -> np.ndarray:
        """``action`` as an (F,) int32 array; no control (None or empty) is control 0 of every factor."""
        if action is None:
            return self._no_control
        control = np.ascontiguousarray(action, dtype=np.int32)
        if control.ndim != 1:
            control = control.reshape(-1)
        if control.shape[0] != self._no_control.shape[0]:
            if not control.size:
                return self._no_control
            raise ValueError(f"action: expected {self._no_control.shape[0]} controls (one per factor), got "
                             f"{control.shape[0]}")
        return control

    def _bind(self, engine: Engine) -> None:
        """Run ``engine``; its ``tick_prepared`` when its dtype is the filter's: the filter's row, priors and
        controls are then already in the form it reads."""
        self._engine = engine
        self._tick_prepared = engine.tick_prepared if np.dtype(engine.dtype) == self.dtype else None
