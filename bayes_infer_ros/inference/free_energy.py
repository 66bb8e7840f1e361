"""Free energy and surprise: how well a posterior, and each reading, fit the model (pure JAX, one model).

**Variational free energy**, exactly as pymdp 1.0.4's ``pymdp.maths.calc_vfe`` (with the masks pymdp's own
``update_posterior_states(..., return_info=True)`` passes it). For one step (FPI), with ``q`` the posterior, ``p``
the prior (D, or the tick's empirical prior) and ``o`` the observations::

    F = sum_f [ E_q ln q_f  -  E_q ln p_f ]  -  sum_m E_q[ ln p(o_m | s) ]
        (neg_entropy_f)     (prior_cross_entropy_f)   (accuracy_m)

``ln p(o_m | s) = sum_o o_m[o] ln A_m[o, s]`` (pymdp's ``xlogy`` likelihood, A clipped at ``MINVAL``), and every
``ln`` of a probability is pymdp's ``log_stable``; ``q ln q`` is ``xlogy(q, clip(q))`` (0 where q is 0). The
complexity of factor f is ``neg_entropy_f + prior_cross_entropy_f`` (KL[q_f || p_f]).

For a window of T steps (VMP/MMP) the terms are per step, ``vfe_t``, and F is their sum. Step t holds its own
entropy and accuracy and either the prior term (at a start: the window's first real step, or after a transition
that is not valid) or the transition term from t-1, per factor
``-E_{q_t(s_f) q_{t-1}(deps)} ln B_f[s_f, deps, a_{t-1, f}]``. Steps before the window's last ``valid_steps`` (its
padding) add nothing, and a transition is valid when both its steps are real and its actions are all >= 0 (a
negative action starts the chain again). A model without B puts the prior term at every real step (pymdp's rule).

**Surprise of a reading** under the prior predictive, per modality m::

    surprise_m = -ln sum_s exp(ln p(o_m | s)) prod_{f in deps_m} p_f(s_f)

which for a one-hot reading o is ``-ln sum_s A_m[o, s] p(s)``, A clipped at MINVAL, so an impossible reading
costs at most ``-ln MINVAL`` (36 nats). A modality without a reading (an all-zero row: no evidence) has surprise 0.

Shapes (one model; the engines map over a leading batch axis): observations ``obs[m]`` (m_m,) or (T, m_m), the
packed posterior ``q`` (S,) or (T, S) and prior (S,) (S = sum n_f, factor sizes ``num_states``, static), actions
(T-1, F) int. ``log_A[m]`` (m_m, n_deps...), ``log_B[f]`` (n_f, n_deps..., u_f): ``log_stable`` of A and B. Terms
come packed in one array, ``(..., M + 3 F + 1)``, as :class:`~.api.FreeEnergy` reads them.
"""
from __future__ import annotations

from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import xlogy

from .numerics import MINVAL

Array = jax.Array
Deps = tuple[tuple[int, ...], ...]


def _expected(tensor: Array, vectors: Sequence[Array]) -> Array:
    """``tensor`` (n_0, ..., n_{k-1}) contracted with one vector per axis -> a scalar.

    Multiply-and-reduce rather than a chain of dots: XLA:CPU fuses it into one kernel (a dot each would be a library
    call, a step of its own in the tick's program)."""
    k = len(vectors)
    x = tensor
    for j, v in enumerate(vectors):
        x = x * v.reshape((1,) * j + (-1,) + (1,) * (k - j - 1))
    return x.sum()


def log_likelihoods(log_A: Sequence[Array], obs: Sequence[Array]) -> list[Array]:
    """ll[m] (n_deps...) = sum_o obs[m][o] log_A[m][o, ...] (multiply-and-reduce: one fused kernel each)."""
    return [(o.reshape((-1,) + (1,) * (la.ndim - 1)) * la).sum(axis=0) for o, la in zip(obs, log_A)]


def _per_factor(x: Array, num_states: Sequence[int]) -> Array:
    """x (..., S) packed -> (..., F): the sum over each factor's states (one fused multiply-and-reduce with a constant
    mask rather than F reductions)."""
    mask = np.repeat(np.eye(len(num_states), dtype=np.float32), num_states, axis=0)  # (S, F)
    return (x[..., :, None] * jnp.asarray(mask, dtype=x.dtype)).sum(axis=-2)


def step_terms(ll: Sequence[Array], A_deps: Deps, q: Array, prior: Array,
               num_states: Sequence[int]) -> tuple[Array, Array, Array]:
    """One step from its log likelihoods ``ll`` (:func:`log_likelihoods`) and the packed posterior ``q`` (S,) and
    prior (S,): (accuracy (M,), neg_entropy (F,), prior_cross_entropy (F,))."""
    offsets = np.concatenate([[0], np.cumsum(num_states)])
    qs = [q[..., offsets[f]:offsets[f + 1]] for f in range(len(num_states))]
    accuracy = jnp.stack([_expected(l, [qs[f] for f in deps]) for l, deps in zip(ll, A_deps)])
    neg_entropy = _per_factor(xlogy(q, jnp.clip(q, min=MINVAL)), num_states)
    prior_ce = _per_factor(-xlogy(q, jnp.clip(prior, min=MINVAL)), num_states)
    return accuracy, neg_entropy, prior_ce


def one_step(ll: Sequence[Array], A_deps: Deps, q: Array, prior: Array, num_states: Sequence[int]) -> Array:
    """One step's packed terms ``(M + 3 F + 1,)`` (pymdp ``calc_vfe`` on single-step posteriors) from its log
    likelihoods and the packed posterior and prior (S,)."""
    accuracy, neg_entropy, prior_ce = step_terms(ll, A_deps, q, prior, num_states)
    vfe = neg_entropy.sum() + prior_ce.sum() - accuracy.sum()
    return jnp.concatenate([accuracy, neg_entropy, prior_ce, jnp.zeros_like(neg_entropy), vfe[None]])


def window_masks(T: int, actions: Array, valid_steps: Optional[Array]) -> tuple[Array, Array]:
    """(obs_valid (T,), trans_valid (T-1,)) as pymdp's ``_build_sequence_validity_masks`` / ``calc_vfe`` make them:
    the last ``valid_steps`` (all when None) steps are real; a transition is valid when both its steps are real and
    every action of it is >= 0."""
    if valid_steps is None:
        obs_valid = jnp.ones((T,), dtype=bool)
    else:
        k = jnp.clip(jnp.asarray(valid_steps, dtype=jnp.int32), 1, T)
        obs_valid = jnp.arange(T) >= (T - k)
    if T <= 1:
        return obs_valid, jnp.zeros((0,), dtype=bool)
    return obs_valid, obs_valid[:-1] & obs_valid[1:] & jnp.all(actions >= 0, axis=-1)


def window(log_A: Sequence[Array], A_deps: Deps, log_B: Optional[Sequence[Array]], B_deps: Deps,
           obs: Sequence[Array], q: Array, prior: Array, actions: Array, valid_steps: Optional[Array],
           num_states: Sequence[int]) -> Array:
    """A window's packed terms ``(T, M + 3 F + 1)`` (pymdp ``calc_vfe`` on sequence posteriors, with pymdp's masks).

    obs[m] (T, m_m), the packed posterior q (T, S) and prior (S,), actions (T-1, F) int, valid_steps None or an int
    scalar; ``log_B`` None: a model without transitions."""
    T = q.shape[0]
    offsets = np.concatenate([[0], np.cumsum(num_states)])
    qs = [q[:, offsets[f]:offsets[f + 1]] for f in range(len(num_states))]
    obs_valid, trans_valid = window_masks(T, actions, valid_steps)
    accuracy, neg_entropy, prior_ce = jax.vmap(
        lambda o, qt: step_terms(log_likelihoods(log_A, o), A_deps, qt, prior, num_states))(list(obs), q)
    valid = obs_valid.astype(accuracy.dtype)[:, None]
    accuracy, neg_entropy, prior_ce = accuracy * valid, neg_entropy * valid, prior_ce * valid
    F = len(qs)
    if log_B is None:
        transition_ce = jnp.zeros_like(neg_entropy)
    else:
        start = obs_valid & jnp.concatenate([jnp.ones((1,), dtype=bool), jnp.logical_not(trans_valid)])
        prior_ce = prior_ce * start.astype(prior_ce.dtype)[:, None]
        if T > 1:
            safe = jnp.where(actions < 0, 0, actions).astype(jnp.int32)

            def transition(q_now, q_prev, a):
                out = []
                for f in range(F):
                    lb = jnp.take(log_B[f], a[f], axis=-1)
                    out.append(-_expected(lb, [q_now[f]] + [q_prev[d] for d in B_deps[f]]))
                return jnp.stack(out)

            ce = jax.vmap(transition)([q[1:] for q in qs], [q[:-1] for q in qs], safe)
            keep = (trans_valid & jnp.logical_not(start[1:])).astype(ce.dtype)[:, None]
            transition_ce = jnp.concatenate([jnp.zeros((1, F), ce.dtype), ce * keep])
        else:
            transition_ce = jnp.zeros_like(neg_entropy)
    vfe = neg_entropy.sum(-1) + prior_ce.sum(-1) + transition_ce.sum(-1) - accuracy.sum(-1)
    return jnp.concatenate([accuracy, neg_entropy, prior_ce, transition_ce, vfe[:, None]], axis=-1)


def surprise_of(ll: Sequence[Array], A_deps: Deps, obs: Sequence[Array], prior: Array,
                num_states: Sequence[int]) -> Array:
    """Each modality's surprise (M,) under the prior predictive of the packed ``prior`` (S,), from the readings' log
    likelihoods ``ll`` (:func:`log_likelihoods`); 0 for a modality without a reading."""
    offsets = np.concatenate([[0], np.cumsum(num_states)])
    priors = [prior[offsets[f]:offsets[f + 1]] for f in range(len(num_states))]
    out = []
    for l, deps, o in zip(ll, A_deps, obs):
        top = l.max()
        value = -(top + jnp.log(_expected(jnp.exp(l - top), [priors[f] for f in deps])))
        out.append(jnp.where(o.sum() > 0, value, jnp.zeros_like(value)))
    return jnp.stack(out)


def surprise(log_A: Sequence[Array], A_deps: Deps, obs: Sequence[Array], prior: Array,
             num_states: Sequence[int]) -> Array:
    """Each modality's surprise under the prior predictive (M,) (nats; 0 for a modality without a reading):
    obs[m] (m_m,), the packed prior (S,)."""
    return surprise_of(log_likelihoods(log_A, obs), A_deps, obs, prior, num_states)
