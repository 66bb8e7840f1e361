"""Seeded simulation of a model's generative process (no ROS, no JAX).

    s_0 ~ D
    s_t[f] ~ B[f][:, s_{t-1}[B_dependencies[f]], a_{t-1}[f]]        t >= 1
    o_t[i] ~ A[i][:, s_t[A_dependencies[i]]]

Every draw is an inverse-CDF lookup of one ``Generator.random()`` double (PCG64), so a rollout is a pure
function of (model, num_steps, seed) and does not depend on numpy's sampling algorithms (``choice`` and
``integers`` are not promised stable across numpy releases; the PCG64 double stream is).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bayes_infer_ros.model import GenerativeModel


@dataclass(frozen=True)
class Rollout:
    """One simulated episode. Integer arrays, time along axis 0.

    states:       (T, F)    true hidden state level per factor
    observations: (T, M)    observed level per modality
    actions:      (T-1, F)  control index per factor taken between step t and t+1 (0 for uncontrolled factors)
    """

    states: np.ndarray
    observations: np.ndarray
    actions: np.ndarray

    @property
    def num_steps(self) -> int:
        return int(self.states.shape[0])


def _draw(rng: np.random.Generator, p: np.ndarray) -> int:
    """Inverse-CDF draw of one index from the (unnormalised, non-negative) vector ``p``."""
    cdf = np.cumsum(np.asarray(p, dtype=np.float64))
    u = rng.random() * cdf[-1]
    return int(min(np.searchsorted(cdf, u, side="right"), len(cdf) - 1))


def action_sequence(num_controls: tuple[int, ...], num_steps: int, rng: np.random.Generator,
                    mean_hold: float = 6.0) -> np.ndarray:
    """(num_steps - 1, F) control indices: each controlled factor holds a random control for a random number
    of steps (geometric, mean ``mean_hold``), like a robot's command stream; uncontrolled factors get 0."""
    num_factors = len(num_controls)
    actions = np.zeros((max(num_steps - 1, 0), num_factors), dtype=np.int64)
    switch_p = 1.0 / max(mean_hold, 1.0)
    current = [0] * num_factors
    for t in range(actions.shape[0]):
        for f, u in enumerate(num_controls):
            if u <= 1:
                continue
            if t == 0 or rng.random() < switch_p:
                current[f] = _draw(rng, np.ones(u))
            actions[t, f] = current[f]
    return actions


def simulate(model: GenerativeModel, num_steps: int, seed: int, mean_hold: float = 6.0) -> Rollout:
    """Roll out ``num_steps`` steps of the generative process; see the module docstring."""
    if num_steps < 1:
        raise ValueError(f"num_steps must be >= 1, got {num_steps}")
    rng = np.random.default_rng(seed)
    F, M = model.num_factors, model.num_modalities
    actions = action_sequence(model.num_controls, num_steps, rng, mean_hold)
    states = np.zeros((num_steps, F), dtype=np.int64)
    observations = np.zeros((num_steps, M), dtype=np.int64)
    for t in range(num_steps):
        for f in range(F):
            if t == 0 or model.B is None:
                p = model.D[f] if t == 0 else np.eye(model.num_states[f])[states[t - 1, f]]
            else:
                deps = model.B_dependencies[f]
                p = model.B[f][(slice(None),) + tuple(int(states[t - 1, d]) for d in deps) + (int(actions[t - 1, f]),)]
            states[t, f] = _draw(rng, p)
        for i in range(M):
            deps = model.A_dependencies[i]
            p = model.A[i][(slice(None),) + tuple(int(states[t, d]) for d in deps)]
            observations[t, i] = _draw(rng, p)
    return Rollout(states=states, observations=observations, actions=actions)

