"""Shared drivers of FPI, VMP and MMP, parameterised by likelihood and transition "ops".

The loops are pymdp 1.0.4's (``run_factorized_fpi``, ``update_marginals``); what a variant changes is
how the contractions inside them are laid out (ops), never the math. One model, unbatched: the
engine vmaps over the batch axis.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import jax
import jax.numpy as jnp
from jax import lax, nn

from .numerics import log_stable
from .reference import sequence_masks

Array = jax.Array
# The inference algorithms every variant runs (pymdp 1.0.4's names).
ALGORITHMS: tuple[str, ...] = ("fpi", "vmp", "mmp")


def run_fpi(lik: Any, lik_params: dict, obs: Sequence[Array], prior: Sequence[Array], num_iter: int) -> list[Array]:
    """Fixed-point iteration (pymdp ``run_factorized_fpi``). obs[i]: (m_i,), prior[f]: (n_f,) -> list of (n_f,)."""
    ll = lik.log_likelihoods(lik_params, obs)
    if len(prior) == 1:
        # pymdp's exact one-pass update for single-factor models (num_iter is irrelevant there).
        return [nn.softmax(lik.joint(lik_params, ll) + log_stable(prior[0]), axis=-1)]
    log_prior = [log_stable(p) for p in prior]

    def step(log_q, _):
        q = [nn.softmax(x) for x in log_q]
        marginal = lik.marginals(lik_params, ll, q)
        return [m + lp for m, lp in zip(marginal, log_prior)], None

    log_q, _ = lax.scan(step, [jnp.zeros_like(p) for p in prior], None, length=num_iter)
    return [nn.softmax(x) for x in log_q]


def mirror_descent_step(tau: float, ln_A: Array, ln_B_past: Any, ln_B_future: Any, ln_qs: Array) -> Array:
    """pymdp ``mirror_gradient_descent_step``."""
    err = ln_A - ln_qs + ln_B_past + ln_B_future
    ln_qs = ln_qs + tau * err
    return nn.softmax(ln_qs - ln_qs.mean(axis=-1, keepdims=True))


def run_sequence(
    kind: str,
    lik: Any,
    lik_params: dict,
    trans: Any,
    trans_params: dict,
    obs: Sequence[Array],
    prior: Sequence[Array],
    actions: Array,
    valid_steps: Optional[Array],
    num_iter: int,
    tau: float,
) -> list[Array]:
    """VMP (``kind="vmp"``) or MMP (``kind="mmp"``): pymdp ``update_marginals``.

    obs[i]: (T, m_i); prior[f]: (n_f,); actions: (T-1, F) int; valid_steps: None or int scalar
    (the last ``valid_steps`` steps are real, as pymdp's ``valid_steps``) -> list of (T, n_f).
    """
    T = obs[0].shape[0]
    obs_valid, trans_valid = sequence_masks(T, actions, valid_steps)
    cond = trans.condition(trans_params, actions)

    ll = jax.vmap(lik.log_likelihoods, in_axes=(None, 0))(lik_params, list(obs))
    if obs_valid is not None:
        ll = jax.tree_util.tree_map(
            lambda x: x * obs_valid.astype(x.dtype).reshape((T,) + (1,) * (x.ndim - 1)), ll
        )
    ln_prior = [log_stable(p) for p in prior]
    messages = trans.vmp_messages if kind == "vmp" else trans.mmp_messages
    marginals = jax.vmap(lik.marginals, in_axes=(None, 0, 0))

    def step(qs, _):
        ln_qs = [log_stable(q) for q in qs]
        future, past = messages(trans_params, cond, qs, ln_prior, trans_valid)
        ln_As = marginals(lik_params, ll, qs)
        return [mirror_descent_step(tau, a, p, fu, lq) for a, p, fu, lq in zip(ln_As, past, future, ln_qs)], None

    qs0 = [nn.softmax(jnp.zeros((T,) + p.shape, dtype=p.dtype)) for p in prior]
    qs, _ = lax.scan(step, qs0, None, length=num_iter)
    return qs
