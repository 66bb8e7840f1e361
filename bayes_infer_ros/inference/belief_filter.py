"""The tick's semantics, once: what the node runs each tick, for one agent or many, and what the offline golden path
replays.

A :class:`BeliefFilter` wraps a built engine (an :class:`~.api.Engine`) and keeps the state between steps, for each of
``b`` agents of one model: ``b = 1`` with an unbatched engine, or the engine's batch size (one row per agent). Every
agent has its own window, beliefs and carried prior; a step of any subset of the agents is ONE engine dispatch (the
rows of agents that do not step are computed and ignored: one compiled shape, no retrace).

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

**Evidence** (:meth:`BeliefFilter.set_evidence`, off by default): each step also gives each reading's surprise under
the step's prior predictive (fpi: the prior the step uses; vmp / mmp: the prediction of the agent's last beliefs under
the control since, D after a reset) and the free energy of its beliefs (``inference.free_energy``; vmp / mmp: the
window's), read with :meth:`BeliefFilter.evidence`. A reading whose surprise is above its modality's gate is refused
before it enters the step: its part of the row is zeroed in the window (no evidence, as a missing reading), so neither
this step nor a later window sees it. fpi does all of it in the tick's one dispatch (``engine.tick_evidence``); vmp /
mmp add the prediction, the surprise and the free energy as calls of their own around the window.

**A modality without an observation is no evidence**: its part of the row is all zero (:func:`no_evidence`).
pymdp 1.0.4's likelihood is ``xlogy(o, A).sum(0)`` = sum_o o[o] log A[o, ...] (log A clipped at MINVAL, so finite):
an all-zero ``o`` adds exactly 0, in every variant (all are linear in ``o``) and at every step of a window. A
uniform ``o`` would add the mean of log A over levels, which differs between states: it is evidence. With no
observation at all, an fpi step returns its prior (softmax(log prior)). An observation a sender gives explicitly
(a ``probabilities`` vector, uniform or not) is used as given.
Shapes: packed observations ``(O,)`` with ``O = sum m_i``, packed states ``(S,)`` with ``S = sum n_f``,
controls ``(F,)`` int, per agent; a batched engine's calls take ``(b, O)``, ``(b, S)``, ``(b, F)``. Pure numpy plus the
engine: no ROS.
"""
from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Optional, Sequence

import numpy as np

from .algorithm_specs import Algorithm
from .api import Engine, FreeEnergy, split_tick_evidence


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
    """Beliefs step by step for the agents of one model (see the module docstring).

    ``engine``: a built engine whose ``algorithm`` is fpi, vmp or mmp, unbatched (one agent) or batched (one row per
    agent); ``D``: the initial prior, one (n_f,) array per factor; ``horizon``: the vmp/mmp window length (also kept
    under fpi); ``has_B``: the model has transitions; ``dtype``: of the beliefs it returns (the engine's, for the
    node: then its buffers are already in the form ``engine.tick_prepared`` reads).
    """

    def __init__(self, engine: Engine, D: Sequence[np.ndarray], horizon: int, has_B: bool, dtype: Any = np.float32):
        self.dtype = np.dtype(dtype)
        self.has_B = bool(has_B)
        self._D = np.concatenate([np.asarray(d, dtype=self.dtype) for d in D])
        self.num_agents = int(engine.batch_size) if engine.batched else 1
        layout = engine.layout
        self._num_factors = len(layout.num_states)
        self.windows = [SequenceWindow(max(int(horizon), 1), layout.num_obs, self._num_factors, self.dtype)
                        for _ in range(self.num_agents)]
        self._last_q: list[Optional[np.ndarray]] = [None] * self.num_agents
        # per agent: (control as int32 bytes, engine, prior): the prior its last fpi dispatch predicted under that
        # control
        self._next: list[Optional[tuple[bytes, Any, np.ndarray]]] = [None] * self.num_agents
        self._no_control = np.zeros(self._num_factors, np.int32)
        self._obs_offsets = layout.obs_offsets
        self._num_modalities = len(layout.num_obs)
        self._evidence_on = False
        self._gates = np.full(self._num_modalities, np.inf)  # nats, float64; in the engine's dtype: _engine_gates
        self._evidence: list[Optional[StepEvidence]] = [None] * self.num_agents
        self._bind(engine)

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
        self._evidence_on = bool(enabled)
        g = np.full(self._num_modalities, np.inf) if gates is None else np.asarray(gates, dtype=np.float64)
        if g.shape != (self._num_modalities,):
            raise ValueError(f"gates: expected shape ({self._num_modalities},) (one per modality), got {g.shape}")
        self._gates = g
        self._bind(self._engine)

    @property
    def evidence_enabled(self) -> bool:
        return self._evidence_on

    def evidence(self, k: int = 0) -> Optional[StepEvidence]:
        """Agent ``k``'s newest step's evidence (None before it, after its reset, and with evidence off)."""
        return self._evidence[k]

    def last_beliefs(self, k: int = 0) -> Optional[np.ndarray]:
        """Agent ``k``'s newest posterior (S,), None before its first step and after its reset."""
        return self._last_q[k]

    def empty(self, k: int = 0) -> bool:
        """No step of agent ``k`` recorded since construction or its last reset."""
        return self.windows[k].valid_steps == 0

    def reset(self, k: Optional[int] = None) -> None:
        """Forget agent ``k``'s steps (every agent's when None): its next step starts from D with an empty window;
        the other agents keep theirs."""
        for j in range(self.num_agents) if k is None else (k,):
            self.windows[j].clear()
            self._last_q[j] = self._next[j] = self._evidence[j] = None

    def swap(self, engine: Engine, horizon: int) -> None:
        """Run ``engine`` (same model structure, same number of agents) from the next step on. The windows are kept,
        resized to ``horizon``; the carried fpi priors are dropped when the algorithm changes."""
        agents = int(engine.batch_size) if engine.batched else 1
        if agents != self.num_agents:
            raise ValueError(f"engine: expected {self.num_agents} agent(s) (batch size), got {agents}")
        if engine.algorithm != self._engine.algorithm:
            self._next = [None] * self.num_agents
        self._bind(engine)
        if int(horizon) != self.windows[0].horizon:
            self.windows = [w.resized(max(int(horizon), 1)) for w in self.windows]

    # ---- one step --------------------------------------------------------------------------------
    def record(self, k: int, obs_row: np.ndarray, action: Optional[Sequence[int]], stamp_ns: int = -1) -> None:
        """Append a step to agent ``k``'s window: ``obs_row`` (O,), ``action`` (F,) the control taken since its
        previous step (ignored for the first step after a reset). Either of another length is refused (ValueError
        naming it)."""
        window = self.windows[k]
        row = np.asarray(obs_row)
        if row.shape != window.last_row.shape:
            raise ValueError(f"obs_row: expected shape {window.last_row.shape} (the packed observation), got "
                             f"{row.shape}")
        window.push(row, None if window.valid_steps == 0 else self._control(action), stamp_ns)

    def infer(self, agents: Sequence[int], actions: Mapping[int, Optional[Sequence[int]]],
              upcoming: Mapping[int, Optional[Sequence[int]]]) -> dict[int, np.ndarray]:
        """Beliefs (S,) of the step :meth:`record` added for each of ``agents``, in one engine dispatch (vmp/mmp:
        one per distinct number of valid steps among them, one once the windows are full). fpi: ``actions[k]`` is
        agent k's control since its previous step, ``upcoming[k]`` the control expected before its next one (None:
        ``actions[k]``); vmp/mmp read the windows (whose ``actions`` the caller may have corrected). On an exception
        nothing changes but the windows."""
        if self._engine.spec.window:
            return self._infer_windows(agents)
        if self.num_agents == 1 and not self._engine.batched:
            return {0: self._infer_one(actions.get(0), upcoming.get(0))}
        return self._infer_rows(agents, actions, upcoming)

    def step(self, obs_row: np.ndarray, action: Optional[Sequence[int]] = None,
             upcoming: Optional[Sequence[int]] = None, stamp_ns: int = -1, k: int = 0) -> np.ndarray:
        """:meth:`record` then :meth:`infer` for agent ``k`` alone: its beliefs (S,) after observing ``obs_row``."""
        self.record(k, obs_row, action, stamp_ns)
        return self.infer((k,), {k: action}, {k: action if upcoming is None else upcoming})[k]

    def warm(self, evidence: bool = False) -> None:
        """Run the fpi calls a step makes beside the engine's own warm-up (the tick with its next prior, and the
        prediction of a prior), on D, changing no state: a build calls it so that a step never compiles. The
        vmp/mmp window and fpi without B are ``engine.warmup``'s calls. ``evidence``: also the calls a step with
        evidence makes (the tick with its evidence; vmp / mmp: the prediction, the surprise, the free energy)."""
        if evidence:
            self._warm_evidence()
        if self._engine.spec.window or not self.has_B:
            return
        saved = list(self._next)
        if self._engine.batched:
            b = self.num_agents
            rows, priors = np.tile(self.windows[0].last_row, (b, 1)), np.tile(self._D, (b, 1))
            controls = np.zeros((b, self._num_factors), np.int32)
            self._predict_rows(priors, controls)
            self._dispatch_rows(rows, priors, controls)
        else:
            self._predict_one(self._D, self._no_control)
            self._tick_one(self.windows[0].last_row, self._D, self._no_control)
        self._next = saved

    def _warm_evidence(self) -> None:
        engine, b = self._engine, self.num_agents
        gates = self._gates.astype(engine.dtype)
        row, prior = self.windows[0].last_row, self._D
        if engine.batched:
            row, prior = np.tile(row, (b, 1)), np.tile(prior, (b, 1))
        controls = np.zeros(row.shape[:-1] + (self._num_factors,), np.int32)
        if not engine.spec.window:
            if engine.batched:
                engine.tick_evidence(row, prior, controls, gates)
            else:
                engine.tick_evidence_prepared(row.astype(engine.dtype), prior.astype(engine.dtype), controls, gates)
            return
        w = self.windows[0]
        obs, actions = w.obs, w.actions
        if engine.batched:
            obs, actions = np.tile(obs, (b, 1, 1)), np.tile(actions, (b, 1, 1))
        if self.has_B:
            engine.predict(engine.layout.split_states(prior), controls)
        engine.surprise(row, prior)
        q = np.asarray(engine.run_packed(obs, prior, actions, valid_steps=w.horizon))
        engine.free_energy(obs, prior, q, actions, valid_steps=w.horizon)

    def _refuse(self, k: int, surprise: np.ndarray) -> np.ndarray:
        """The readings of agent ``k``'s newest step whose surprise passes their gate (M,) bool, zeroed in its
        window (no evidence from now on)."""
        refused = np.asarray(surprise, self._engine_gates.dtype) > self._engine_gates
        if refused.any():
            row, o = self.windows[k].last_row, self._obs_offsets
            for m in np.flatnonzero(refused):
                row[o[m]:o[m + 1]] = 0
        return refused

    # ---- fpi: one agent, unbatched engine ------------------------------------------------------------
    def _infer_one(self, action: Optional[Sequence[int]], upcoming: Optional[Sequence[int]]) -> np.ndarray:
        control = self._control(action)
        prior = self._D if self._last_q[0] is None else self._prior_for(0, control)
        if prior is None:
            prior = self._predict_one(self._last_q[0], control)
        row = self.windows[0].last_row
        if self._evidence_on:
            nxt_action = control if upcoming is None or upcoming is action else self._control(upcoming)
            posterior, nxt = self._tick_evidence_one(row, prior, nxt_action)
            self._next[0] = (nxt_action.tobytes(), self._engine, nxt) if self.has_B else None
        elif self.has_B:
            nxt_action = control if upcoming is None or upcoming is action else self._control(upcoming)
            posterior, nxt = self._tick_one(row, prior, nxt_action)
            self._next[0] = (nxt_action.tobytes(), self._engine, nxt)
        else:
            posterior = np.asarray(self._engine.run_packed(row, prior), dtype=self.dtype)
            self._next[0] = None  # predicted from the previous posterior: stale now
        self._last_q[0] = posterior
        return posterior

    def _tick_one(self, row: np.ndarray, prior: np.ndarray, control: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One fpi dispatch of the unbatched engine: beliefs (S,) and the next prior (S,) under ``control``."""
        if self._prepared:  # the row, prior and control are already in the kernel's form
            return self._engine.tick_prepared(row, prior, control)
        q, nxt = self._engine.tick(row, prior, control)
        return np.asarray(q, dtype=self.dtype), np.asarray(nxt, dtype=self.dtype)

    def _tick_evidence_one(self, row: np.ndarray, prior: np.ndarray,
                           control: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The fpi dispatch with evidence (``engine.tick_evidence``): beliefs (S,), next prior (S,); agent 0's
        evidence kept, its refused readings zeroed in its window."""
        engine = self._engine
        if self._prepared:
            packed = engine.tick_evidence_prepared(row, prior, control, self._engine_gates)
        else:
            packed = np.asarray(engine.tick_evidence_prepared(np.asarray(row, engine.dtype),
                                                              np.asarray(prior, engine.dtype), control,
                                                              self._engine_gates))
        q, nxt, surprise, fe = split_tick_evidence(packed, engine.layout, self._num_modalities)
        self._evidence[0] = StepEvidence(surprise, self._refuse(0, surprise), fe)
        return np.asarray(q, dtype=self.dtype), np.asarray(nxt, dtype=self.dtype)

    def _predict_one(self, q: np.ndarray, control: np.ndarray) -> np.ndarray:
        engine = self._engine
        prior = np.concatenate([np.asarray(x, dtype=self.dtype)
                                for x in engine.predict(engine.layout.unpack_states(q), control)])
        self._next[0] = (control.tobytes(), engine, prior)
        return prior

    # ---- fpi: b agents, batched engine ----------------------------------------------------------------
    def _infer_rows(self, agents: Sequence[int], actions: Mapping[int, Optional[Sequence[int]]],
                    upcoming: Mapping[int, Optional[Sequence[int]]]) -> dict[int, np.ndarray]:
        b = self.num_agents
        obs = np.stack([w.last_row for w in self.windows])
        prior = np.tile(self._D, (b, 1))
        up = np.zeros((b, self._num_factors), np.int32)
        stale = []
        for k in agents:
            control = self._control(actions.get(k))
            up[k] = control if upcoming.get(k) is None else self._control(upcoming[k])
            if self._last_q[k] is None:
                continue
            carried = self._prior_for(k, control)
            if carried is None:
                stale.append((k, control))
            else:
                prior[k] = carried
        if stale:  # a control other than the one the last step predicted under: predict again, one call
            q_prev, controls = prior.copy(), np.zeros_like(up)
            for k, control in stale:
                q_prev[k], controls[k] = self._last_q[k], control
            predicted = self._predict_rows(q_prev, controls)
            for k, _ in stale:
                prior[k] = predicted[k]
        if self._evidence_on:
            dtype = self._engine.dtype
            q, nxt, surprise, fe = self._engine.tick_evidence(
                np.ascontiguousarray(obs, dtype=dtype), np.ascontiguousarray(prior, dtype=dtype),
                np.ascontiguousarray(up, dtype=np.int32), self._engine_gates)
            q, nxt, surprise, terms = np.asarray(q), np.asarray(nxt), np.asarray(surprise), np.asarray(fe.terms)
            for k in agents:
                self._evidence[k] = StepEvidence(surprise[k], self._refuse(k, surprise[k]),
                                                 FreeEnergy(terms[k], fe.num_modalities, fe.num_factors, False))
        else:
            q, nxt = self._dispatch_rows(obs, prior, up)
        out = {}
        for k in agents:
            out[k] = self._last_q[k] = np.asarray(q[k], dtype=self.dtype)
            self._next[k] = (up[k].tobytes(), self._engine, np.asarray(nxt[k], dtype=self.dtype)) if self.has_B else None
        return out

    def _dispatch_rows(self, obs: np.ndarray, prior: np.ndarray, up: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One fpi dispatch of every row: beliefs (b, S) and the next priors (b, S) under ``up`` (b, F) (the beliefs
        themselves without B)."""
        dtype = self._engine.dtype
        q, nxt = self._engine.tick(np.ascontiguousarray(obs, dtype=dtype), np.ascontiguousarray(prior, dtype=dtype),
                                   np.ascontiguousarray(up, dtype=np.int32))
        return np.asarray(q), np.asarray(nxt)

    def _predict_rows(self, q: np.ndarray, controls: np.ndarray) -> np.ndarray:
        """pymdp ``compute_expected_state`` for every row: q (b, S), controls (b, F) -> next priors (b, S)."""
        engine = self._engine
        out = engine.predict(engine.layout.split_states(np.asarray(q, dtype=engine.dtype)),
                             np.asarray(controls, np.int32))
        return np.concatenate([np.asarray(x) for x in out], axis=-1)

    # ---- vmp / mmp ---------------------------------------------------------------------------------
    def _infer_windows(self, agents: Sequence[int]) -> dict[int, np.ndarray]:
        engine, out = self._engine, {}
        surprise, refused = self._window_surprise(agents) if self._evidence_on else (None, None)
        if not engine.batched:
            w = self.windows[0]
            beliefs = engine.run_packed(w.obs, self._D, w.actions, valid_steps=w.valid_steps)
            out[0] = self._last_q[0] = np.asarray(beliefs, dtype=self.dtype)[-1]
            self._next[0] = None
            if surprise is not None:
                fe = engine.free_energy(w.obs, self._D, beliefs, w.actions, valid_steps=w.valid_steps)
                self._evidence[0] = StepEvidence(surprise[0], refused[0], FreeEnergy(
                    np.asarray(fe.terms), fe.num_modalities, fe.num_factors, True))
            return out
        obs = np.stack([w.obs for w in self.windows])
        actions = np.stack([w.actions for w in self.windows])
        prior = np.tile(self._D, (self.num_agents, 1))
        for valid in sorted({self.windows[k].valid_steps for k in agents}):
            beliefs = np.asarray(engine.run_packed(obs, prior, actions, valid_steps=valid))
            terms = None
            if surprise is not None:
                fe = engine.free_energy(obs, prior, beliefs, actions, valid_steps=valid)
                terms = np.asarray(fe.terms)
            for k in agents:
                if self.windows[k].valid_steps == valid:
                    out[k] = self._last_q[k] = np.asarray(beliefs[k, -1], dtype=self.dtype)
                    self._next[k] = None
                    if terms is not None:
                        self._evidence[k] = StepEvidence(surprise[k], refused[k], FreeEnergy(
                            terms[k], fe.num_modalities, fe.num_factors, True))
        return out

    def _window_surprise(self, agents: Sequence[int]) -> tuple[np.ndarray, dict[int, np.ndarray]]:
        """vmp / mmp: each agent's newest readings' surprise (b, M) under its prior predictive (the prediction of its
        last beliefs under the control since, D after a reset), and each stepping agent's refused readings (M,)
        bool, zeroed in its window before the window is inferred."""
        engine, b = self._engine, self.num_agents
        prior = np.tile(self._D, (b, 1)).astype(engine.dtype)
        stepped = [k for k in agents if self._last_q[k] is not None and self.windows[k].valid_steps > 1]
        if stepped and self.has_B:
            q = prior.copy()
            controls = np.zeros((b, self._num_factors), np.int32)
            for k in stepped:
                q[k], controls[k] = self._last_q[k], self.windows[k].actions[-1]
            if engine.batched:
                predicted = self._predict_rows(q, controls)
            else:
                predicted = np.concatenate([np.asarray(x) for x in engine.predict(
                    engine.layout.unpack_states(q[0]), controls[0])])[None]
            for k in stepped:
                prior[k] = predicted[k]
        elif stepped:  # no B: the prior of a step is the last beliefs
            for k in stepped:
                prior[k] = self._last_q[k]
        rows = np.stack([w.last_row for w in self.windows]).astype(engine.dtype)
        surprise = np.asarray(engine.surprise(rows if engine.batched else rows[0], prior if engine.batched else prior[0]))
        surprise = surprise.reshape(b, self._num_modalities)
        return surprise, {k: self._refuse(k, surprise[k]) for k in agents}

    # ---- helpers -----------------------------------------------------------------------------------
    def _prior_for(self, k: int, control: np.ndarray) -> Optional[np.ndarray]:
        """Agent ``k``'s prior for this fpi step when its last step carries one for ``control`` (F,) int32: its
        posterior without B, the prior its last dispatch predicted under that control; None when it must be
        predicted again."""
        if not self.has_B:
            return self._last_q[k]
        cached = self._next[k]
        if cached is not None and cached[0] == control.tobytes() and cached[1] is self._engine:
            return cached[2]
        return None

    def _control(self, action: Optional[Sequence[int]]) -> np.ndarray:
        """``action`` as an (F,) int32 array; no control (None or empty) is control 0 of every factor."""
        if action is None:
            return self._no_control
        control = np.ascontiguousarray(action, dtype=np.int32)
        if control.ndim != 1:
            control = control.reshape(-1)
        if control.shape[0] != self._num_factors:
            if not control.size:
                return self._no_control
            raise ValueError(f"action: expected {self._num_factors} controls (one per factor), got "
                             f"{control.shape[0]}")
        return control

    def _bind(self, engine: Engine) -> None:
        """Run ``engine``; its ``tick_prepared`` when its dtype is the filter's: the filter's row, priors and
        controls are then already in the form it reads."""
        self._engine = engine
        self._prepared = np.dtype(engine.dtype) == self.dtype
        self._engine_gates = np.ascontiguousarray(self._gates, dtype=engine.dtype)
