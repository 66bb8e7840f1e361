"""What the agent node should publish for a bag, through pymdp 1.0.4: the oracle beside
:func:`bayes_infer_ros.bags.golden.engine_beliefs` (the node's code), for the replay tests."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bayes_infer_ros.bags.bagio import Episode
from bayes_infer_ros.bags.golden import observation_distributions
from bayes_infer_ros.bags.golden import windows as golden_windows
from bayes_infer_ros.model import GenerativeModel
from lab.pymdp_oracle import as_jax, expected_state, masked_window_program, program


def pymdp_beliefs(model: GenerativeModel, episode: Episode, algorithm: str, *, num_iter: int = 16,
                  tau: float = 1.0, horizon: int = 5, dtype=np.float32, padded: bool = True) -> list[np.ndarray]:
    """:func:`bayes_infer_ros.bags.golden.engine_beliefs` through pymdp 1.0.4. vmp/mmp windows: ``padded``
    (default) runs pymdp's ``update_posterior_states`` on a fixed front-padded window with ``valid_steps`` (one
    compile, pymdp's default tau); otherwise ``algos.run_vmp``/``run_mmp`` on the truncated windows (one compile
    per length, ``tau`` passed), which the tests use to check that the two agree."""
    A = as_jax(model.A, dtype)
    B = as_jax(model.B, dtype)
    D = as_jax(model.D, dtype)
    obs = as_jax(observation_distributions(model, episode), dtype)
    T = episode.num_steps
    out = [np.zeros((T, n)) for n in model.num_states]
    if algorithm == "fpi":
        run = program("fpi", tuple(map(tuple, model.A_dependencies)), (), num_iter)
        predict = jax.jit(lambda q, a: expected_state(q, B, a, model.B_dependencies))
        prior = D
        for t in range(T):
            qs = run(A, None, [o[t] for o in obs], prior, None)
            for f, q in enumerate(qs):
                out[f][t] = np.asarray(q)
            if t + 1 < T and B is not None:
                prior = predict(qs, jnp.asarray(episode.actions[t], dtype=jnp.int32))
        return out
    if padded:  # pymdp's own fixed-window masking (valid_steps): one compile
        masked = masked_window_program(algorithm, A, B, D, model.A_dependencies, model.B_dependencies,
                                              num_iter)
        pad = [jnp.concatenate([jnp.full((horizon - 1, o.shape[1]), 1.0 / o.shape[1], dtype=dtype), o]) for o in obs]
        acts_pad = jnp.concatenate([jnp.zeros((horizon - 1, model.num_factors), jnp.int32),
                                    jnp.asarray(episode.actions, jnp.int32).reshape(-1, model.num_factors)])
        for t in range(T):
            qs = masked([o[t:t + horizon] for o in pad], acts_pad[t:t + horizon - 1], min(t + 1, horizon))
            for f, q in enumerate(qs):
                out[f][t] = np.asarray(q)[-1]
        return out

    window = program(algorithm, tuple(map(tuple, model.A_dependencies)),
                            tuple(map(tuple, model.B_dependencies)), num_iter, tau)
    for t, t0 in golden_windows(T, horizon):
        acts = jnp.asarray(episode.actions[t0:t], dtype=jnp.int32).reshape(t - t0, model.num_factors)
        qs = window(A, B, [o[t0:t + 1] for o in obs], D, acts)
        for f, q in enumerate(qs):
            out[f][t] = np.asarray(q)[-1]
    return out
