"""The tick's semantics, once: what the node runs each tick, for one agent or many, and what the offline golden path
replays.

A :class:`BeliefFilter` wraps a built engine (an :class:`~.api.Engine`) and keeps the state between steps, for each of
``b`` agents of one model: ``b = 1`` with an unbatched engine, or the engine's batch size (one row per agent). One
path for one agent or many: every agent is a row of the filter's (b, ...) arrays, with its own window, beliefs and
carried prior, and a step of any subset of the agents is ONE engine call on all b rows (the rows of agents that do
not step are computed and ignored: one compiled shape, no retrace).

- **fpi** carries the prior: ``q_t = fpi(o_t, prior_t)`` with ``prior_0 = D`` and
  ``prior_{t+1} = predict(q_t, a_t)`` (pymdp's ``compute_expected_state``; ``a_t`` is the control taken between
  step t and t+1). One engine call (``engine.step``) returns the beliefs and the prior under the control expected
  next (``upcoming``); the next step uses it when its control is that one, and predicts again otherwise. Without B
  the prior is the previous posterior.
- **vmp / mmp** infer over a fixed window (:class:`SequenceWindow`) of the last ``horizon`` steps with the
  controls between them and the prior D at the window's first step; the step's belief is the window's last row.
  One fixed window length means one compiled program: padding rows are masked with ``valid_steps``.
- **reset** forgets everything (the next step starts from D); **swap** installs another engine, keeping the
  window (resized when the horizon changes) and dropping the carried prior when the algorithm changes.
- **set_prior** (the node's ``~/set_beliefs``) sets an agent's prior for some factors from its next step on. fpi:
  that step's prior for those factors is the one set (the others' is what the step would have used: the carried
  prior, predicted under the control), once. vmp / mmp: the window restarts at that step (its earlier steps are
  dropped) with the prior set as the agent's D for those factors and its newest beliefs (D before any) for the
  others, and that D stays the agent's window prior until its reset.

Every step is recorded in the window whatever the algorithm, so a switch from fpi to vmp starts with history.

**Evidence** (:meth:`BeliefFilter.set_evidence`, off by default): each step also gives each reading's surprise under
the step's prior predictive (fpi: the prior the step uses; vmp / mmp: the prediction of the agent's last beliefs under
the control since, D after a reset) and the free energy of its beliefs (``inference.free_energy``; vmp / mmp: the
window's), read with :meth:`BeliefFilter.evidence`. A reading whose surprise is above its modality's gate is refused
before it enters the step: its part of the row is zeroed in the window (no evidence, as a missing reading), so neither
this step nor a later window sees it. fpi does all of it in the step's one call (``engine.step`` with gates); vmp /
mmp add the prediction, the surprise and the free energy as calls of their own around the window.

**A modality without an observation is no evidence**: its part of the row is all zero (:func:`no_evidence`).
pymdp 1.0.4's likelihood is ``xlogy(o, A).sum(0)`` = sum_o o[o] log A[o, ...] (log A clipped at MINVAL, so finite):
an all-zero ``o`` adds exactly 0, in every variant (all are linear in ``o``) and at every step of a window. A
uniform ``o`` would add the mean of log A over levels, which differs between states: it is evidence. With no
observation at all, an fpi step returns its prior (softmax(log prior)). An observation a sender gives explicitly
(a ``probabilities`` vector, uniform or not) is used as given.
Shapes: packed observations ``(O,)`` with ``O = sum m_i``, packed states ``(S,)`` with ``S = sum n_f``,
controls ``(F,)`` int, per agent; the engine's calls take ``(b, O)``, ``(b, S)``, ``(b, F)``. Pure numpy plus the
engine: no ROS.
"""
from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Optional, Sequence

import numpy as np

from .algorithm_specs import Algorithm
from .api import Engine, FreeEnergy, split_step, step_width


class StepEvidence(NamedTuple):
    """One agent's step: each reading's surprise (M,) in nats (0 without a reading), the readings its gates refused
    (M,) bool, and the free energy of its beliefs (one step's terms; vmp / mmp: the window's, ``window=True``)."""

    surprise: np.ndarray
    refused: np.ndarray
    free_energy: FreeEnergy


def no_evidence(num_levels: int, dtype: Any = np.float32) -> np.ndarray:
    """The observation (m,) of a modality that has none: all zero, so ``xlogy(o, A)`` adds nothing to the
    likelihood (see the module docstring)."""
    return np.zeros(num_levels, dtype=dtype)


class SequenceWindow:
    """The fixed-size VMP/MMP window (right-aligned; only the last ``valid_steps`` rows are real).

    ``obs``: (T, O), ``actions``: (T-1, F) int32 where ``actions[t]`` moved step t to t+1, ``stamps``: (T,) int64
    (-1 on padding), ``valid_steps`` in 0..T. Padding rows hold no evidence (all zero, and masked by
    ``valid_steps`` anyway) and action 0. ``arrays``: (obs, actions, stamps) to hold the window in (views of a
    filter's arrays of every agent's windows; default: its own).
    """

    def __init__(self, horizon: int, num_obs: Sequence[int], num_factors: int, dtype: Any = np.float32,
                 arrays: Optional[tuple[np.ndarray, np.ndarray, np.ndarray]] = None):
        if horizon < 1:
            raise ValueError(f"horizon: expected >= 1, got {horizon}")
        self.horizon = int(horizon)
        self.num_obs = tuple(int(m) for m in num_obs)
        self.num_factors = int(num_factors)
        self.dtype = np.dtype(dtype)
        if arrays is None:
            arrays = (np.zeros((self.horizon, sum(self.num_obs)), self.dtype),
                      np.zeros((max(self.horizon - 1, 0), self.num_factors), np.int32),
                      np.full(self.horizon, -1, np.int64))
        self.obs, self.actions, self.stamps = arrays
        self.last_row = self.obs[-1]  # a view: the newest step's observation row (O,), written in place by push
        self.valid_steps = 0
        self.clear()

    def clear(self) -> None:
        self.obs[:] = 0  # no evidence: every modality's all-zero observation (no_evidence)
        self.actions[:] = 0
        self.stamps[:] = -1
        self.valid_steps = 0

    def push(self, obs_row: np.ndarray, action: Optional[Sequence[int]] = None, stamp_ns: int = -1) -> None:
        """Append one step stamped ``stamp_ns``; ``action`` (F,) is the control that led from the previous step
        to this one (None: 0)."""
        self.obs[:-1] = self.obs[1:]
        self.last_row[:] = obs_row
        self.stamps[:-1] = self.stamps[1:]
        self.stamps[-1] = stamp_ns
        if self.horizon > 1:
            self.actions[:-1] = self.actions[1:]
            self.actions[-1] = 0 if action is None else action
        self.valid_steps = min(self.valid_steps + 1, self.horizon)

    def copy_into(self, other: "SequenceWindow") -> None:
        """Write the newest min(this, other) real steps into ``other`` (a window of any length)."""
        other.clear()
        keep = min(self.valid_steps, other.horizon)
        if keep:
            other.obs[-keep:] = self.obs[-keep:]
            other.stamps[-keep:] = self.stamps[-keep:]
            if keep > 1:
                other.actions[-(keep - 1):] = self.actions[-(keep - 1):]
            other.valid_steps = keep

    def resized(self, horizon: int) -> "SequenceWindow":
        """A window of another length holding the newest min(old, new) real steps."""
        new = SequenceWindow(horizon, self.num_obs, self.num_factors, self.dtype)
        self.copy_into(new)
        return new


class BeliefFilter:
    """Beliefs step by step for the b agents of one model (see the module docstring).

    ``engine``: a built engine whose ``algorithm`` is fpi, vmp or mmp: unbatched (one agent) or batched (one row per
    agent, b = its batch size); ``D``: the initial prior, one (n_f,) array per factor; ``horizon``: the vmp/mmp
    window length (also kept under fpi); ``has_B``: the model has transitions; ``dtype``: of the filter's buffers and
    the beliefs it returns (default: the engine's, whose ``step`` then reads the buffers as they are).

    One path for one agent or many: every agent is a row of the filter's (b, ...) arrays, and a step of any subset of
    the agents is one engine call on all b rows (the rows of agents that do not step are computed and ignored: one
    compiled shape, no retrace).
    """

    def __init__(self, engine: Engine, D: Sequence[np.ndarray], horizon: int, has_B: bool, dtype: Any = None):
        self.dtype = np.dtype(engine.dtype if dtype is None else dtype)
        self.has_B = bool(has_B)
        self.num_agents = b = int(engine.batch_size) if engine.batched else 1
        layout = engine.layout
        self._layout = layout
        self._num_factors, self._num_modalities = len(layout.num_states), len(layout.num_obs)
        self._S = layout.state_size
        self._D = np.concatenate([np.asarray(d, dtype=self.dtype) for d in D])
        self._obs_offsets = layout.obs_offsets
        self._no_control = np.zeros(self._num_factors, np.int32)
        self._make_windows(max(int(horizon), 1))
        # the step's buffers: each agent's prior and upcoming control (rows of agents that do not step keep valid
        # values: D and control 0)
        self._prior = np.tile(self._D, (b, 1))
        self._up = np.zeros((b, self._num_factors), np.int32)
        # per agent: its newest step's row of the engine's output (beliefs | next prior | evidence), None before its
        # first step and after its reset; the control (int32 bytes) its next prior was predicted under
        self._row: list[Optional[np.ndarray]] = [None] * b
        self._next_key: list[Optional[bytes]] = [None] * b
        self._evidence_on = False
        self._evidence_width = step_width(layout, self._num_modalities, True)
        self._gates = np.full(self._num_modalities, np.inf)  # nats, float64; in the engine's dtype: _engine_gates
        self._window_evidence: list[Optional[StepEvidence]] = [None] * b
        # set_prior: per agent, (factors' mask (S,) bool, prior (S,)) for its next step; and each agent's window prior
        self._set_prior: list[Optional[tuple[np.ndarray, np.ndarray]]] = [None] * b
        self._window_D = np.tile(self._D, (b, 1))
        self._bind(engine)

    def _make_windows(self, horizon: int) -> None:
        """Every agent's window of ``horizon`` steps as views of three time-major arrays, (T, b, ...): the newest row
        of every agent, ``_rows`` (b, O), is one C-contiguous block that the engine's stepper reads as it is."""
        b, layout = self.num_agents, self._layout
        self._obs = np.zeros((horizon, b, layout.obs_size), self.dtype)
        self._actions = np.zeros((max(horizon - 1, 0), b, self._num_factors), np.int32)
        self._stamps = np.full((horizon, b), -1, np.int64)
        self.windows = [SequenceWindow(horizon, layout.num_obs, self._num_factors, self.dtype,
                                       (self._obs[:, k], self._actions[:, k], self._stamps[:, k])) for k in range(b)]
        self._rows = self._obs[-1]

    # ---- state -----------------------------------------------------------------------------------
    @property
    def engine(self) -> Engine:
        return self._engine

    @property
    def algorithm(self) -> str:
        return self._engine.algorithm

    @property
    def spec(self) -> Algorithm:
        """The algorithm's record (``algorithm_specs``)."""
        return self._engine.spec

    @property
    def D(self) -> np.ndarray:
        """The initial prior, packed (S,)."""
        return self._D

    @property
    def window(self) -> SequenceWindow:
        """Agent 0's window (the single agent's)."""
        return self.windows[0]

    def set_evidence(self, enabled: bool, gates: Optional[Sequence[float]] = None) -> None:
        """Compute each step's evidence from the next step on (``enabled``), with ``gates`` (M,) in nats (+inf or
        None: no gate for that modality / any)."""
        g = np.full(self._num_modalities, np.inf) if gates is None else np.asarray(gates, dtype=np.float64)
        if g.shape != (self._num_modalities,):
            raise ValueError(f"gates: expected shape ({self._num_modalities},) (one per modality), got {g.shape}")
        self._evidence_on = bool(enabled)
        self._gates = g
        self._bind(self._engine)

    @property
    def evidence_enabled(self) -> bool:
        return self._evidence_on

    def evidence(self, k: int = 0) -> Optional[StepEvidence]:
        """Agent ``k``'s newest step's evidence (None before it, after its reset, and with evidence off)."""
        row = self._row[k]
        if not self._evidence_on or row is None:
            return None
        if self._engine.spec.window:
            return self._window_evidence[k]
        if row.shape[0] < self._evidence_width:  # stepped before the evidence was on
            return None
        _, _, surprise, fe = split_step(row, self._layout, self._num_modalities)
        return StepEvidence(surprise, surprise > self._engine_gates, fe)

    def last_beliefs(self, k: int = 0) -> Optional[np.ndarray]:
        """Agent ``k``'s newest posterior (S,), None before its first step and after its reset."""
        row = self._row[k]
        return None if row is None else row[:self._S]

    def empty(self, k: int = 0) -> bool:
        """No step of agent ``k`` recorded since construction or its last reset."""
        return self.windows[k].valid_steps == 0

    def reset(self, k: Optional[int] = None) -> None:
        """Forget agent ``k``'s steps (every agent's when None): its next step starts from D with an empty window;
        the other agents keep theirs."""
        for j in range(self.num_agents) if k is None else (k,):
            self.windows[j].clear()
            self._row[j] = self._next_key[j] = self._window_evidence[j] = self._set_prior[j] = None
            self._prior[j] = self._D
            self._window_D[j] = self._D
            self._up[j] = 0

    def set_prior(self, k: int, prior: np.ndarray, factors: Sequence[int]) -> None:
        """Agent ``k``'s next step starts from ``prior`` (S,) packed for ``factors`` (indices; the other factors' slots
        are ignored): see the module docstring (fpi: that step's prior; vmp / mmp: the window restarts with it as
        the agent's D). A later call before that step replaces it; a reset drops it. ValueError naming a prior of
        another shape or a factor out of range."""
        values = np.asarray(prior, dtype=np.float64).reshape(-1)
        if values.shape != (self._S,):
            raise ValueError(f"prior: expected shape ({self._S},) (the packed states), got {values.shape}")
        mask = np.zeros(self._S, bool)
        bounds = self._layout.state_offsets
        for f in factors:
            if not 0 <= int(f) < self._num_factors:
                raise ValueError(f"factors: {f} is not a factor index (0..{self._num_factors - 1})")
            mask[bounds[int(f)]:bounds[int(f) + 1]] = True
        self._set_prior[k] = (mask, values.astype(self.dtype))

    def swap(self, engine: Engine, horizon: int) -> None:
        """Run ``engine`` (same model structure, same number of agents) from the next step on. The windows are kept,
        resized to ``horizon``; the carried fpi priors are dropped when the algorithm changes."""
        agents = int(engine.batch_size) if engine.batched else 1
        if agents != self.num_agents:
            raise ValueError(f"engine: expected {self.num_agents} agent(s) (batch size), got {agents}")
        if engine.algorithm != self._engine.algorithm:
            self._next_key = [None] * self.num_agents
        self._bind(engine)
        if int(horizon) != self.windows[0].horizon:
            old = self.windows
            self._make_windows(max(int(horizon), 1))
            for w, new in zip(old, self.windows):
                w.copy_into(new)
            self._bind(engine)  # the stepper reads the new windows' rows

    # ---- one step --------------------------------------------------------------------------------
    def record(self, k: int, obs_row: np.ndarray, action: Optional[Sequence[int]], stamp_ns: int = -1) -> None:
        """Append a step to agent ``k``'s window: ``obs_row`` (O,), ``action`` (F,) the control taken since its
        previous step (ignored for the first step after a reset). Either of another length is refused (ValueError
        naming it)."""
        window = self.windows[k]
        row = obs_row if obs_row.__class__ is np.ndarray else np.asarray(obs_row)
        if row.shape != window.last_row.shape:
            raise ValueError(f"obs_row: expected shape {window.last_row.shape} (the packed observation), got "
                             f"{row.shape}")
        window.push(row, None if window.valid_steps == 0 else self._control(action), stamp_ns)

    def infer(self, agents: Sequence[int], actions: Mapping[int, Optional[Sequence[int]]],
              upcoming: Mapping[int, Optional[Sequence[int]]]) -> dict[int, np.ndarray]:
        """Beliefs (S,) of the step :meth:`record` added for each of ``agents``, in one engine call (vmp/mmp: one per
        distinct number of valid steps among them, one once the windows are full). fpi: ``actions[k]`` is agent k's
        control since its previous step, ``upcoming[k]`` the control expected before its next one (None:
        ``actions[k]``); vmp/mmp read the windows (whose ``actions`` the caller may have corrected). On an exception
        nothing changes but the windows."""
        if self._window_algorithm:
            return self._infer_windows(agents)
        prior, up, stale = self._prior, self._up, None
        for k in agents:
            control = self._control(actions.get(k))
            ahead = upcoming.get(k)
            up[k] = control if ahead is None else self._control(ahead)
            row = self._row[k]
            if row is None:
                prior[k] = self._D
            elif not self.has_B or self._next_key[k] == control.tobytes():
                prior[k] = row[self._S:2 * self._S]
            else:  # a control other than the one its last step predicted under: predicted again, below
                stale = [] if stale is None else stale
                stale.append((k, control))
        if stale is not None:
            self._predict_stale(stale)
        for k in agents:
            if self._set_prior[k] is not None:  # set_prior: this step's prior for the factors it names
                mask, values = self._set_prior[k]
                prior[k, mask] = values[mask]
        out = self._stepper()
        if self._gated:
            self._refuse(agents, out)
        S, result = self._S, {}
        for k in agents:
            row = self._row[k] = out[k]
            self._set_prior[k] = None
            self._next_key[k] = up[k].tobytes()
            result[k] = row[:S] if self._same_dtype else row[:S].astype(self.dtype)
        return result

    def step(self, obs_row: np.ndarray, action: Optional[Sequence[int]] = None,
             upcoming: Optional[Sequence[int]] = None, stamp_ns: int = -1, k: int = 0) -> np.ndarray:
        """:meth:`record` then :meth:`infer` for agent ``k`` alone: its beliefs (S,) after observing ``obs_row``."""
        self.record(k, obs_row, action, stamp_ns)
        return self.infer((k,), {k: action}, {k: upcoming})[k]

    def warm(self, evidence: bool = False) -> None:
        """Run the calls a step makes beside the engine's own warm-up (fpi: the step, with its gates when
        ``evidence``, and the prediction of a prior; vmp / mmp with ``evidence``: the prediction, the surprise, the
        free energy), on D, changing no state: a build calls it so that a step never compiles."""
        engine, b = self._engine, self.num_agents
        prior = np.tile(self._D, (b, 1)).astype(engine.dtype)
        controls = np.zeros((b, self._num_factors), np.int32)
        rows = np.ascontiguousarray(self._rows, dtype=engine.dtype)
        if not engine.spec.window:
            engine.step(rows, prior, controls, self._engine_gates if evidence else None)
            if self.has_B:
                engine.predict(prior, controls)
            return
        if not evidence:
            return
        obs, actions = self._window_inputs()
        if self.has_B:
            engine.predict(prior, controls)
        engine.surprise(rows if engine.batched else rows[0], prior if engine.batched else prior[0])
        D = prior if engine.batched else prior[0]
        horizon = self.windows[0].horizon
        q = np.asarray(engine.run_packed(obs, D, actions, valid_steps=horizon))
        engine.free_energy(obs, D, q, actions, valid_steps=horizon)

    # ---- fpi ---------------------------------------------------------------------------------------
    def _predict_stale(self, stale: list[tuple[int, np.ndarray]]) -> None:
        """The priors of the agents whose control differs from the one their last step predicted under: pymdp's
        ``compute_expected_state`` of their last beliefs under the control taken, one call for all of them."""
        q, controls = self._prior.copy(), np.zeros_like(self._up)
        for k, control in stale:
            q[k], controls[k] = self._row[k][:self._S], control
        predicted = self._engine.predict(q, controls)
        for k, _ in stale:
            self._prior[k] = predicted[k]

    def _refuse(self, agents: Sequence[int], out: np.ndarray) -> None:
        """Zero in its window each stepping agent's readings whose surprise passed their gate (no evidence from now
        on; the step itself already left them out)."""
        S, M, o = self._S, self._num_modalities, self._obs_offsets
        refused = out[:, 2 * S:2 * S + M] > self._engine_gates
        for k in agents:
            for m in np.flatnonzero(refused[k]):
                self.windows[k].last_row[o[m]:o[m + 1]] = 0

    # ---- vmp / mmp ---------------------------------------------------------------------------------
    def _window_inputs(self) -> tuple[np.ndarray, np.ndarray]:
        """Every window's observations and actions as the engine's ``run_packed`` takes them: (b, T, O) and
        (b, T-1, F) for a batched engine (agent-major copies of the time-major windows), agent 0's (T, O) and
        (T-1, F) for an unbatched one (views)."""
        if self._engine.batched:
            return (np.ascontiguousarray(self._obs.transpose(1, 0, 2)),
                    np.ascontiguousarray(self._actions.transpose(1, 0, 2)))
        return self._obs[:, 0], self._actions[:, 0]

    def _restart_windows(self, agents: Sequence[int]) -> None:
        """set_prior under vmp / mmp: each of ``agents`` with a prior set keeps only its newest step in its window,
        and its window prior is the one set for the factors it names, its newest beliefs (D before any) for the
        others."""
        for k in agents:
            if self._set_prior[k] is None:
                continue
            mask, values = self._set_prior[k]
            row = self._row[k]
            base = self._window_D[k] if row is None else row[:self._S]
            self._window_D[k] = np.where(mask, values, base)
            window = self.windows[k]
            window.obs[:-1] = 0
            window.stamps[:-1] = -1
            window.actions[:] = 0
            window.valid_steps = 1
            self._row[k] = self._set_prior[k] = None

    def _infer_windows(self, agents: Sequence[int]) -> dict[int, np.ndarray]:
        engine, out, S = self._engine, {}, self._S
        self._restart_windows(agents)
        surprise, refused = self._window_surprise(agents) if self._evidence_on else (None, None)
        obs, actions = self._window_inputs()
        D = self._window_D if engine.batched else self._window_D[0]
        for valid in sorted({self.windows[k].valid_steps for k in agents}):
            beliefs = np.asarray(engine.run_packed(obs, D, actions, valid_steps=valid))
            fe = None
            if surprise is not None:
                fe = engine.free_energy(obs, D, beliefs, actions, valid_steps=valid)
                terms = np.asarray(fe.terms) if engine.batched else np.asarray(fe.terms)[None]
            beliefs = beliefs if engine.batched else beliefs[None]
            for k in agents:
                if self.windows[k].valid_steps != valid:
                    continue
                # the row's layout of an fpi step's (beliefs | next prior): without B, the next prior is the beliefs
                row = self._row[k] = np.concatenate([beliefs[k, -1], beliefs[k, -1]]).astype(self.dtype)
                self._next_key[k] = None
                out[k] = row[:S]
                if fe is not None:
                    self._window_evidence[k] = StepEvidence(surprise[k], refused[k], FreeEnergy(
                        terms[k], fe.num_modalities, fe.num_factors, True))
        return out

    def _window_surprise(self, agents: Sequence[int]) -> tuple[np.ndarray, dict[int, np.ndarray]]:
        """vmp / mmp: each agent's newest readings' surprise (b, M) under its prior predictive (the prediction of its
        last beliefs under the control since, D after a reset), and each stepping agent's refused readings (M,)
        bool, zeroed in its window before the window is inferred."""
        engine, b = self._engine, self.num_agents
        prior = self._window_D.astype(engine.dtype)
        stepped = [k for k in agents if self._row[k] is not None and self.windows[k].valid_steps > 1]
        if stepped and self.has_B:
            q = prior.copy()
            controls = np.zeros((b, self._num_factors), np.int32)
            for k in stepped:
                q[k], controls[k] = self._row[k][:self._S], self.windows[k].actions[-1]
            predicted = engine.predict(q, controls)
            for k in stepped:
                prior[k] = predicted[k]
        elif stepped:  # no B: the prior of a step is the last beliefs
            for k in stepped:
                prior[k] = self._row[k][:self._S]
        rows = np.ascontiguousarray(self._rows, dtype=engine.dtype)
        surprise = np.asarray(engine.surprise(rows if engine.batched else rows[0],
                                              prior if engine.batched else prior[0]))
        surprise = surprise.reshape(b, self._num_modalities)
        refused = {}
        for k in agents:
            refused[k] = surprise[k] > self._engine_gates
            for m in np.flatnonzero(refused[k]):
                self.windows[k].last_row[self._obs_offsets[m]:self._obs_offsets[m + 1]] = 0
        return surprise, refused

    # ---- helpers -----------------------------------------------------------------------------------
    def _control(self, action: Optional[Sequence[int]]) -> np.ndarray:
        """``action`` as an (F,) int32 array; no control (None or empty) is control 0 of every factor."""
        if action is None:
            return self._no_control
        control = action if action.__class__ is np.ndarray and action.dtype == np.int32 else np.asarray(
            action, dtype=np.int32)
        if control.ndim != 1:
            control = control.reshape(-1)
        if control.shape[0] != self._num_factors:
            if not control.size:
                return self._no_control
            raise ValueError(f"action: expected {self._num_factors} controls (one per factor), got "
                             f"{control.shape[0]}")
        return control

    def _bind(self, engine: Engine) -> None:
        """Run ``engine`` from now on: what a step passes it, decided once (its gates in its dtype, or None without
        evidence; whether any gate can refuse) and, for fpi, its stepper bound to the filter's rows, priors and
        upcoming controls (in the engine's dtype, read as they are at each step; in another dtype, converted at
        each step by ``engine.step``)."""
        self._engine = engine
        self._window_algorithm = engine.spec.window
        self._same_dtype = np.dtype(engine.dtype) == self.dtype
        self._engine_gates = np.ascontiguousarray(self._gates, dtype=engine.dtype)
        self._step_gates = self._engine_gates if self._evidence_on else None
        self._gated = self._evidence_on and bool(np.isfinite(self._gates).any())
        self._stepper: Any = None
        if not self._window_algorithm:
            if self._same_dtype:
                self._stepper = engine.stepper(self._rows, self._prior, self._up, self._step_gates)
            else:
                self._stepper = lambda: engine.step(self._rows, self._prior, self._up, self._step_gates)
