"""One FPI tick's inputs for a model, shared by the tick benchmarks (node_latency, free_energy_cost)."""
from __future__ import annotations

import numpy as np


def default_tick_inputs(model, seed: int = 0) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
    """(obs, prior, control): one-hot observations of random levels (one (m_i,) float32 per modality), the model's
    D (one (n_f,) float32 per factor) and the zero control (F,) int32, as the node's controls are."""
    rng = np.random.default_rng(seed)
    obs = [np.eye(a.shape[0], dtype=np.float32)[rng.integers(a.shape[0])] for a in model.A]
    prior = [np.asarray(d, np.float32) for d in model.D]
    return obs, prior, np.zeros(model.num_factors, np.int32)
