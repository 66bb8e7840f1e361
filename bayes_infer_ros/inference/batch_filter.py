"""Beliefs of b agents of one model, step by step, with one batched engine call per step.

:class:`BatchBeliefFilter` is :class:`~.belief_filter.BeliefFilter`'s semantics (fpi carries each agent's prior,
vmp/mmp infer over each agent's window; reset and swap) for ``b`` agents that share one model: the engine is
built with a leading batch axis of ``b`` (``engine.batch_size``), every agent has its own window, beliefs and
carried prior, and a step of any subset of the agents is ONE engine dispatch for all ``b`` rows (the rows of
agents that do not step are computed and ignored: one compiled shape, no retrace).

The engine call lives in one function, :func:`batched_tick` (fpi) and :func:`batched_sequence` (vmp/mmp).
``batched_tick`` is the batched engine's ``tick``: beliefs and next priors of every row in one dispatch (the JAX
engine's vmapped tick, fused_numba's ``tick_agents``).

Shapes: observations (b, O) (fpi) or (b, T, O) (vmp/mmp), states (b, S), controls (b, F) int32. Pure numpy plus
the engine: no ROS.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import numpy as np

from .belief_filter import SequenceWindow
from .api import Engine


def predict_rows(engine: Engine, q: np.ndarray, controls: np.ndarray) -> np.ndarray:
    """pymdp ``compute_expected_state`` for every row: q (b, S), controls (b, F) -> next priors (b, S)."""
    out = engine.predict(engine.layout.split_states(np.asarray(q, dtype=engine.dtype)), np.asarray(controls, np.int32))
    return np.concatenate([np.asarray(x) for x in out], axis=-1)


def batched_tick(engine: Engine, obs: np.ndarray, prior: np.ndarray, upcoming: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One fpi step of every row in one dispatch: beliefs (b, S) and the next prior (b, S) under ``upcoming`` (b, F)
    (the beliefs themselves without B)."""
    q, nxt = engine.tick(np.ascontiguousarray(obs, dtype=engine.dtype), np.ascontiguousarray(prior, dtype=engine.dtype),
                         np.ascontiguousarray(upcoming, dtype=np.int32))
    return np.asarray(q), np.asarray(nxt)


def batched_sequence(engine: Engine, obs: np.ndarray, prior: np.ndarray, actions: np.ndarray,
                     valid_steps: int) -> np.ndarray:
    """One vmp/mmp window of every row: obs (b, T, O), prior (b, S), actions (b, T-1, F) -> (b, T, S)."""
    return np.asarray(engine.run_packed(obs, prior, actions, valid_steps=valid_steps))


class BatchBeliefFilter:
    """``engine``: built with batch size b (one row per agent); ``D``: the model's initial prior, one (n_f,) per
    factor; ``horizon``: the window length; ``has_B``: the model has transitions."""

    def __init__(self, engine: Engine, D: Sequence[np.ndarray], horizon: int, has_B: bool, dtype: Any = np.float32):
        if not engine.batched:
            raise ValueError("engine: expected a batched engine (one row per agent)")
        self.dtype = np.dtype(dtype)
        self.has_B = bool(has_B)
        self._D = np.concatenate([np.asarray(d, dtype=self.dtype) for d in D])
        self._engine = engine
        self.num_agents = int(engine.batch_size)
        layout = engine.layout
        self._num_factors = len(layout.num_states)
        self.windows = [SequenceWindow(max(int(horizon), 1), layout.num_obs, self._num_factors, self.dtype)
                        for _ in range(self.num_agents)]
        self._last_q: list[Optional[np.ndarray]] = [None] * self.num_agents
        # per agent: (control as int32 bytes, engine, prior) predicted by the last step
        self._next: list[Optional[tuple[bytes, Any, np.ndarray]]] = [None] * self.num_agents
        self._no_control = np.zeros(self._num_factors, np.int32)

    @property
    def engine(self) -> Engine:
        return self._engine

    @property
    def algorithm(self) -> str:
        return self._engine.algorithm

    def last_beliefs(self, k: int) -> Optional[np.ndarray]:
        """Agent ``k``'s newest posterior (S,), None before its first step and after its reset."""
        return self._last_q[k]

    def empty(self, k: int) -> bool:
        return self.windows[k].valid_steps == 0

    def reset(self, k: Optional[int] = None) -> None:
        """Forget agent ``k``'s steps (every agent's when None); the others keep theirs."""
        for j in range(self.num_agents) if k is None else (k,):
            self.windows[j].clear()
            self._last_q[j] = self._next[j] = None

    def swap(self, engine: Engine, horizon: int) -> None:
        """Run ``engine`` (same structure and batch size) from the next step on; windows kept, resized."""
        if engine.batch_size != self.num_agents:
            raise ValueError(f"engine: expected batch size {self.num_agents}, got {engine.batch_size}")
        if engine.algorithm != self._engine.algorithm:
            self._next = [None] * self.num_agents
        self._engine = engine
        if int(horizon) != self.windows[0].horizon:
            self.windows = [w.resized(max(int(horizon), 1)) for w in self.windows]

    def record(self, k: int, obs_row: np.ndarray, action: Optional[Sequence[int]], stamp_ns: int = -1) -> None:
        """Append a step to agent ``k``'s window (``action``: the control since its previous step)."""
        row = np.asarray(obs_row)
        if row.shape != self.windows[k].last_row.shape:
            raise ValueError(f"obs_row: expected shape {self.windows[k].last_row.shape} (the packed observation), "
                             f"got {row.shape}")
        self.windows[k].push(row, None if self.empty(k) else self._control(action), stamp_ns)

    def infer(self, agents: Sequence[int], actions: Mapping[int, Optional[Sequence[int]]],
              upcoming: Mapping[int, Optional[Sequence[int]]]) -> dict[int, np.ndarray]:
        """Beliefs (S,) of the step :meth:`record` added for each of ``agents``, in one engine dispatch (vmp/mmp:
        one per distinct number of valid steps among them, one once the windows are full). ``actions[k]``: agent
        k's control since its previous step; ``upcoming[k]``: the control expected before its next one."""
        if self.algorithm != "fpi":
            return self._infer_sequence(agents)
        b = self.num_agents
        obs = np.stack([w.last_row for w in self.windows])
        prior = np.tile(self._D, (b, 1))
        up = np.zeros((b, self._num_factors), np.int32)
        stale = []
        for k in agents:
            control = self._control(actions.get(k))
            up[k] = control if upcoming.get(k) is None else self._control(upcoming[k])
            cached = self._next[k]
            if self._last_q[k] is None:
                continue
            if not self.has_B:
                prior[k] = self._last_q[k]
            elif cached is not None and cached[0] == control.tobytes() and cached[1] is self._engine:
                prior[k] = cached[2]
            else:
                stale.append((k, control))
        if stale:  # a control other than the one the last step predicted under: predict again, one call
            q_prev, controls = prior.copy(), np.zeros_like(up)
            for k, control in stale:
                q_prev[k], controls[k] = self._last_q[k], control
            predicted = predict_rows(self._engine, q_prev, controls)
            for k, _ in stale:
                prior[k] = predicted[k]
        q, nxt = batched_tick(self._engine, obs, prior, up)
        out = {}
        for k in agents:
            out[k] = self._last_q[k] = np.asarray(q[k], dtype=self.dtype)
            self._next[k] = ((up[k].tobytes(), self._engine, np.asarray(nxt[k], dtype=self.dtype)) if self.has_B
                             else None)
        return out

    def _infer_sequence(self, agents: Sequence[int]) -> dict[int, np.ndarray]:
        obs = np.stack([w.obs for w in self.windows])
        actions = np.stack([w.actions for w in self.windows])
        prior = np.tile(self._D, (self.num_agents, 1))
        out = {}
        for valid in sorted({self.windows[k].valid_steps for k in agents}):
            beliefs = batched_sequence(self._engine, obs, prior, actions, valid)
            for k in agents:
                if self.windows[k].valid_steps == valid:
                    out[k] = self._last_q[k] = np.asarray(beliefs[k, -1], dtype=self.dtype)
                    self._next[k] = None
        return out

    def _control(self, action: Optional[Sequence[int]]) -> np.ndarray:
        if action is None:
            return self._no_control
        control = np.ascontiguousarray(action, dtype=np.int32).reshape(-1)
        if control.shape[0] != self._num_factors:
            if not control.size:
                return self._no_control
            raise ValueError(f"action: expected {self._num_factors} controls (one per factor), got {control.shape[0]}")
        return control
