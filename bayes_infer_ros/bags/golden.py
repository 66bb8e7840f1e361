"""What the agent node should publish for a bag, computed offline (golden values for the replay tests).

The node's semantics, reproduced step by step over an :class:`~bayes_infer_ros.bags.Episode`:

- fpi: ``q_t = fpi(o_t, prior_t)`` with ``prior_0 = D`` and ``prior_{t+1} = predict(q_t, a_t)`` (pymdp's
  ``compute_expected_state``; ``a_t`` is the action taken between t and t+1, published before o_{t+1}).
- vmp / mmp: the window of the last ``horizon`` steps ``o_{t-H+1..t}`` with the actions between them and the
  prior D at the window's first step; the published belief is the window's last row.

:func:`engine_beliefs` runs it with ``bayes_infer_ros.inference`` (the code the node runs) and returns
``list[(T, n_f)]`` in float64; the lab's ``golden_pymdp.pymdp_beliefs`` computes the same through pymdp 1.0.4.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from bayes_infer_ros.autotune import EngineConfig, engine_for
from bayes_infer_ros.inference.belief_filter import BeliefFilter
from bayes_infer_ros.model import GenerativeModel

from .bagio import Episode


def observation_distributions(model: GenerativeModel, episode: Episode) -> list[np.ndarray]:
    """``(T, m_i)`` per modality: one-hot of the observed level, or the probabilities sent with level -1."""
    out = []
    for i, m in enumerate(model.num_obs):
        dists = np.zeros((episode.num_steps, m))
        for t in range(episode.num_steps):
            level = int(episode.observations[t, i])
            if level >= 0:
                dists[t, level] = 1.0
            else:
                p = episode.probabilities[(t, i)]
                dists[t] = p / p.sum()
        out.append(dists)
    return out


def windows(T: int, horizon: int):
    """(t, the first step of the window ending at t) for every step t: the last ``horizon`` steps."""
    for t in range(T):
        yield t, max(0, t - horizon + 1)


def engine_beliefs(model: GenerativeModel, episode: Episode, algorithm: str, *, variant: str = "baseline",
                   num_iter: int = 16, tau: float = 1.0, horizon: int = 5,
                   dtype=np.float32) -> list[np.ndarray]:
    """The node's tick over the episode: one :class:`~bayes_infer_ros.inference.belief_filter.BeliefFilter` step
    per observation, the control taken since the previous step as its action and the next one as upcoming."""
    m = model.with_dtype(dtype)
    engine = engine_for(m, EngineConfig(algorithm, variant, num_iter, tau, horizon), variant)
    belief_filter = BeliefFilter(engine, m.D, horizon, has_B=m.B is not None, dtype=dtype)
    obs = [o.astype(dtype) for o in observation_distributions(model, episode)]
    T = episode.num_steps
    actions = np.asarray(episode.actions, dtype=np.int32).reshape(-1, model.num_factors)
    zero = np.zeros(model.num_factors, np.int32)
    out = [np.zeros((T, n)) for n in model.num_states]
    for t in range(T):
        row = np.concatenate([o[t] for o in obs])
        action = actions[t - 1] if t > 0 else zero
        upcoming = actions[t] if t < actions.shape[0] else zero
        q = belief_filter.step(row, action, upcoming)
        for f, x in enumerate(engine.layout.split_states(q)):
            out[f][t] = np.asarray(x)
    return out


def posterior_mode_accuracy(beliefs: list[np.ndarray], states: np.ndarray,
                            mask: Optional[np.ndarray] = None) -> np.ndarray:
    """Per factor: fraction of steps where argmax of the belief equals the true state. beliefs[f]: (T, n_f)."""
    T = states.shape[0]
    mask = np.ones(T, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    mask = mask & np.all(states >= 0, axis=1)
    return np.array([float(np.mean(np.argmax(b[mask], axis=1) == states[mask, f])) for f, b in enumerate(beliefs)])
