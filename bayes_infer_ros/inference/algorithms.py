"""The one driver of FPI, VMP and MMP, parameterised by likelihood and transition "ops".

The loops are pymdp 1.0.4's (``run_factorized_fpi``, ``update_marginals``); what a variant changes is
how the contractions inside them are laid out (ops), never the math. One model, unbatched: the
engine vmaps over the batch axis.

Every ops class declares what it offers as class attributes (read here, never probed): ``padded`` (likelihood
ops: ``marginals_padded``; transition ops: ``vmp_messages_padded`` / ``mmp_messages_padded``) and, for likelihood
ops, ``folds_prior`` (``fold_prior``). Posteriors travel through the loop in one of two layouts, chosen from those
declarations:

* :class:`ListPosteriors`: a list of ``(…, n_f)`` arrays, one per factor (``marginals``);
* :class:`PaddedPosteriors`: ONE zero-padded ``(…, F, n_max)`` array (padded likelihood ops and, for VMP/MMP,
  padded transition ops); softmax runs on ``-inf``-masked padding, so padded probabilities are exact zeros and
  the mean of the mirror-descent step is over real states.

Both carry the posterior ``q = softmax(log q)`` from the uniform one (a constant) and return the last
carry; pymdp carries ``log q`` from 0, which is the same operations in the same order. Likelihood ops that
fold the prior (``fold_prior(ll, log_prior) -> ll``) add FPI's constant prior into their per-call terms once
instead of once per iteration.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax, nn

from .numerics import log_stable
from .reference import sequence_masks
from .variants.transitions import pad_states, unpad_states

Array = jax.Array


def mirror_descent_step(tau: float, ln_A: Array, ln_B_past: Any, ln_B_future: Any, ln_qs: Array) -> Array:
    """pymdp ``mirror_gradient_descent_step``."""
    err = ln_A - ln_qs + ln_B_past + ln_B_future
    ln_qs = ln_qs + tau * err
    return nn.softmax(ln_qs - ln_qs.mean(axis=-1, keepdims=True))


class ListPosteriors:
    """Posteriors as a list of (…, n_f) arrays; messages from the ops' list API (``marginals``)."""

    def __init__(self, lik: Any):
        self.lik = lik

    def pack(self, xs: Sequence[Array]) -> list[Array]:
        return list(xs)

    def pack_log(self, xs: Sequence[Array]) -> list[Array]:
        """log_stable of each (…, n_f) array."""
        return [log_stable(x) for x in xs]

    def unpack(self, q: list[Array]) -> list[Array]:
        return q

    def uniform(self, prior: Sequence[Array], lead: tuple[int, ...] = ()) -> list[Array]:
        return [nn.softmax(jnp.zeros(lead + p.shape, dtype=p.dtype)) for p in prior]

    def softmax(self, x: list[Array]) -> list[Array]:
        return [nn.softmax(v) for v in x]

    def add(self, x: list[Array], y: list[Array]) -> list[Array]:
        return [a + b for a, b in zip(x, y)]

    def marginals(self, params: dict, ll: Any) -> Callable[[list[Array]], list[Array]]:
        return lambda q: self.lik.marginals(params, ll, q)

    def window_marginals(self, params: dict, ll: Any) -> Callable[[list[Array]], list[Array]]:
        return lambda Q: jax.vmap(self.lik.marginals, in_axes=(None, 0, 0))(params, ll, Q)

    def messages(self, kind: str, trans: Any, trans_params: dict, cond: Any, ln_prior: list[Array],
                 trans_valid: Optional[Array]) -> Callable[[list[Array]], tuple[Any, Any]]:
        fn = trans.vmp_messages if kind == "vmp" else trans.mmp_messages
        return lambda Q: fn(trans_params, cond, Q, ln_prior, trans_valid)

    def mirror_step(self, tau: float, ln_A: list[Array], past: Any, future: Any, Q: list[Array]) -> list[Array]:
        return [mirror_descent_step(tau, a, p, fu, log_stable(q)) for a, p, fu, q in zip(ln_A, past, future, Q)]


class PaddedPosteriors:
    """Posteriors as one zero-padded (…, F, n_max) array; messages from ``marginals_padded``."""

    def __init__(self, lik: Any):
        self.lik = lik
        self.num_states = tuple(lik.num_states)
        self.n_max = int(lik.n_max)
        self.mask = np.arange(self.n_max)[None, :] < np.asarray(self.num_states)[:, None]  # (F, n_max)

    def pack(self, xs: Sequence[Array]) -> Array:
        """xs[f]: (..., n_f) -> (..., F, n_max), zero-padded."""
        return pad_states(xs, self.n_max)

    def pack_log(self, xs: Sequence[Array]) -> Array:
        """log_stable of xs[f] (…, n_f), packed (…, F, n_max) with zeros in the padding: one log, not one per factor."""
        return jnp.where(self.mask, log_stable(self.pack(xs)), 0.0)

    def unpack(self, q: Array) -> list[Array]:
        return unpad_states(q, self.num_states)

    def uniform(self, prior: Sequence[Array], lead: tuple[int, ...] = ()) -> Array:
        """softmax of log q = 0 over the real states, as a constant."""
        q0 = self.mask / self.mask.sum(axis=-1, keepdims=True)
        return jnp.asarray(np.broadcast_to(q0, lead + q0.shape), dtype=prior[0].dtype)

    def softmax(self, x: Array) -> Array:
        return nn.softmax(jnp.where(self.mask, x, -jnp.inf), axis=-1)

    def add(self, x: Array, y: Array) -> Array:
        return x + y

    def marginals(self, params: dict, ll: Any) -> Callable[[Array], Array]:
        return lambda q: self.lik.marginals_padded(ll, q)

    def window_marginals(self, params: dict, ll: Any) -> Callable[[Array], Array]:
        return lambda Q: self.lik.marginals_padded(ll, Q)  # takes the leading time axis natively

    def messages(self, kind: str, trans: Any, trans_params: dict, cond: Any, ln_prior: Array,
                 trans_valid: Optional[Array]) -> Callable[[Array], tuple[Array, Array]]:
        if not trans.has_B:
            def no_B(Q: Array) -> tuple[Array, Array]:
                zero = jnp.zeros_like(Q)
                return (zero if kind == "vmp" else jnp.broadcast_to(ln_prior[None], Q.shape)), zero

            return no_B
        fn = trans.vmp_messages_padded if kind == "vmp" else trans.mmp_messages_padded
        return lambda Q: fn(trans_params, cond, Q, ln_prior, trans_valid)

    def mirror_step(self, tau: float, ln_A: Array, past: Array, future: Array, Q: Array) -> Array:
        ln_qs = log_stable(Q)
        ln_qs = ln_qs + tau * (ln_A - ln_qs + past + future)
        counts = jnp.asarray(np.asarray(self.num_states), dtype=ln_qs.dtype)[:, None]
        mean = jnp.where(self.mask, ln_qs, 0.0).sum(axis=-1, keepdims=True) / counts
        return self.softmax(ln_qs - mean)


def posteriors(lik: Any, trans: Any = None) -> Any:
    """The posterior layout the ops declare: padded when the likelihood ops (and, for sequences, the
    transition ops) are ``padded``, else the list layout."""
    padded = lik.padded and (trans is None or trans.padded)
    return PaddedPosteriors(lik) if padded else ListPosteriors(lik)


def run_fpi(lik: Any, lik_params: dict, obs: Sequence[Array], prior: Sequence[Array], num_iter: int) -> list[Array]:
    """Fixed-point iteration (pymdp ``run_factorized_fpi``). obs[i]: (m_i,), prior[f]: (n_f,) -> list of (n_f,)."""
    ll = lik.log_likelihoods(lik_params, obs)
    if len(prior) == 1:
        # pymdp's exact one-pass update for single-factor models (num_iter is irrelevant there).
        return [nn.softmax(lik.joint(lik_params, ll) + log_stable(prior[0]), axis=-1)]
    post = posteriors(lik)
    log_prior = post.pack_log(prior)
    if lik.folds_prior:  # the prior is constant over the iterations: one add, once
        message = post.marginals(lik_params, lik.fold_prior(ll, log_prior))
    else:
        marginals = post.marginals(lik_params, ll)

        def message(q):
            return post.add(marginals(q), log_prior)

    def step(q, _):
        return post.softmax(message(q)), None

    q, _ = lax.scan(step, post.uniform(prior), None, length=num_iter)
    return post.unpack(q)


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
    post = posteriors(lik, trans)
    T = obs[0].shape[0]
    obs_valid, trans_valid = sequence_masks(T, actions, valid_steps)
    cond = trans.condition(trans_params, actions)
    ll = jax.vmap(lik.log_likelihoods, in_axes=(None, 0))(lik_params, list(obs))
    if obs_valid is not None:
        ll = jax.tree_util.tree_map(
            lambda x: x * obs_valid.astype(x.dtype).reshape((T,) + (1,) * (x.ndim - 1)), ll
        )
    ln_prior = post.pack_log(prior)
    messages = post.messages(kind, trans, trans_params, cond, ln_prior, trans_valid)
    marginals = post.window_marginals(lik_params, ll)

    def step(Q, _):
        future, past = messages(Q)
        return post.mirror_step(tau, marginals(Q), past, future, Q), None

    Q, _ = lax.scan(step, post.uniform(prior, (T,)), None, length=num_iter)
    return post.unpack(Q)
