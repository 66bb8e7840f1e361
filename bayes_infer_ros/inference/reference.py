"""Baseline ops: pymdp 1.0.4's looped contractions, with log-tensors precomputed at build time.

Every method works on ONE model and ONE time step; the engine vmaps over batch and time.
Plans are frozen dataclasses of static ints/tuples (hashable by value); arrays live in ``params``.
"""
from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any, ClassVar, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..model.generative_model import ModelStructure
from .numerics import MINVAL, log_stable, log_stable_np
from .sizes import unmerged_elements

Array = jax.Array
Deps = tuple[tuple[int, ...], ...]


def contract(tensor: Array, vectors: Sequence[Array], axes: Sequence[int], keep: Sequence[int]) -> Array:
    """Contract ``tensor`` with one vector per axis in ``axes``; keep the axes in ``keep`` (in order).

    The shared primitive behind pymdp's ``factor_dot``/``factor_dot_flex``: an einsum whose
    contraction order is optimised once at trace time.
    """
    letters = string.ascii_letters
    t_sub = letters[: tensor.ndim]
    operands = [tensor]
    subs = [t_sub]
    for v, ax in zip(vectors, axes):
        operands.append(v)
        subs.append(t_sub[ax])
    out = "".join(t_sub[k] for k in keep)
    return jnp.einsum(",".join(subs) + "->" + out, *operands, optimize="optimal" if len(operands) <= 6 else "greedy")


def marginal_contributions(ll: Array, deps: tuple[int, ...], qs: Sequence[Array]) -> list[Array]:
    """For one modality: E_{q without f}[ll] for each factor f in deps (pymdp ``mll_factors``).

    ll: (n_deps[0], ..., n_deps[-1]); returns one (n_f,) array per position in deps.
    """
    if len(deps) == 1:
        return [ll]
    out = []
    for l in range(len(deps)):
        others = [j for j in range(len(deps)) if j != l]
        out.append(contract(ll, [qs[deps[j]] for j in others], others, (l,)))
    return out


def accumulate_marginals(contributions: Sequence[Sequence[Array]], A_dependencies: Deps,
                         num_states: Sequence[int]) -> list[Array]:
    """Sum per-modality contributions into per-factor (n_f,) messages, in pymdp's order; a factor that no modality
    observes gets zeros (pymdp's ``jnp.zeros(1)``, at the factor's size so it also stacks over time steps)."""
    total: list[Any] = [None] * len(num_states)
    for m, deps in enumerate(A_dependencies):
        for l, f in enumerate(deps):
            total[f] = contributions[m][l] if total[f] is None else total[f] + contributions[m][l]
    dtype = contributions[0][0].dtype
    return [jnp.zeros(n, dtype) if t is None else t for t, n in zip(total, num_states)]


@dataclass(frozen=True)
class LoopedLikelihood:
    """Baseline likelihood messages: one contraction per modality and factor, as pymdp."""

    padded: ClassVar[bool] = False  # its messages take the list of posteriors (no ``marginals_padded``)
    folds_prior: ClassVar[bool] = False  # no ``fold_prior``: the driver adds FPI's log prior each iteration

    structure: ModelStructure

    @classmethod
    def planned_elements(cls, structure: ModelStructure, nonzeros: np.ndarray) -> int:
        """Stored elements for one model: the unmerged log A tensors."""
        return unmerged_elements(structure)

    @classmethod
    def prepare(cls, structure: ModelStructure, A: Sequence[np.ndarray], dtype: Any) -> tuple["LoopedLikelihood", dict]:
        """A[i]: (b, m_i, n_deps...) -> params {"log_A": [(b, m_i, n_deps...)]}."""
        return cls(structure), {"log_A": [jnp.asarray(log_stable_np(a), dtype=dtype) for a in A]}

    def log_likelihoods(self, params: dict, obs: Sequence[Array]) -> list[Array]:
        """obs[i]: (m_i,) -> ll[i]: (n_deps_i...) = sum_o obs[o] log A_i[o, ...]."""
        return [jnp.tensordot(o, la, axes=(0, 0)) for o, la in zip(obs, params["log_A"])]

    def marginals(self, params: dict, ll: Sequence[Array], qs: Sequence[Array]) -> list[Array]:
        """qs[f]: (n_f,) -> per factor (n_f,): sum over modalities of expected log-likelihood."""
        deps = self.structure.A_dependencies
        contributions = [marginal_contributions(ll[m], deps[m], qs) for m in range(len(deps))]
        return accumulate_marginals(contributions, deps, self.structure.num_states)

    def joint(self, params: dict, ll: Sequence[Array]) -> Array:
        """Single-factor models: the summed log-likelihood (n_0,)."""
        return sum(ll[1:], ll[0])


# ---- transitions ------------------------------------------------------------------------------
def select_transitions(B: Array, log_B: Array, actions_f: Array) -> tuple[Array, Array]:
    """pymdp ``_condition_transitions_on_actions`` for one factor, 'neutral' mode.

    B, log_B: (n_f, n_deps..., u_f); actions_f: (T-1,) int -> (T-1, n_f, n_deps...) each.
    A negative action selects a uniform transition (1 / n_f).
    """
    actions_f = actions_f.astype(jnp.int32)
    safe = jnp.where(actions_f < 0, 0, actions_f)
    sel = jnp.moveaxis(jnp.take(B, safe, axis=-1), -1, 0)
    log_sel = jnp.moveaxis(jnp.take(log_B, safe, axis=-1), -1, 0)
    n_f = B.shape[0]
    neutral = jnp.ones_like(B[..., 0]) / jnp.clip(jnp.asarray(n_f, B.dtype), min=MINVAL)
    invalid = (actions_f < 0).reshape((actions_f.shape[0],) + (1,) * (sel.ndim - 1))
    sel = jnp.where(invalid, neutral, sel)
    log_sel = jnp.where(invalid, log_stable(neutral), log_sel)
    return sel, log_sel


def sequence_masks(T: int, actions: Array, valid_steps: Optional[Array]) -> tuple[Optional[Array], Array]:
    """(obs_valid (T,) or None, trans_valid (T-1,)) exactly as pymdp builds them.

    Without ``valid_steps`` pymdp applies no masks (negative actions only select the neutral B).
    """
    if valid_steps is None:
        return None, jnp.ones((max(T - 1, 0),), dtype=bool)
    k = jnp.clip(jnp.asarray(valid_steps, dtype=jnp.int32), 1, T)
    obs_valid = jnp.arange(T) >= (T - k)
    if T <= 1:
        return obs_valid, jnp.zeros((0,), dtype=bool)
    trans_valid = obs_valid[:-1] & obs_valid[1:] & jnp.all(actions >= 0, axis=-1)
    return obs_valid, trans_valid


def _start_masks(trans_valid: Array) -> tuple[Array, Array]:
    start = jnp.concatenate([jnp.ones((1,), dtype=bool), jnp.logical_not(trans_valid)])
    outgoing = jnp.concatenate([trans_valid, jnp.zeros((1,), dtype=bool)])
    return start, outgoing


def _inverse_B_deps(B_dependencies: Deps, num_factors: int) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(i for i, d in enumerate(B_dependencies) if f in d) for f in range(num_factors))


def _forward_contract(b: Array, qs_prev: Sequence[Array]) -> Array:
    """b: (T-1, n_f, n_deps...), qs_prev[j]: (T-1, n_dep_j) -> (T-1, n_f)."""
    letters = string.ascii_letters
    sub = letters[: b.ndim]
    subs = [sub] + [sub[0] + sub[2 + j] for j in range(len(qs_prev))]
    return jnp.einsum(",".join(subs) + "->" + sub[:2], b, *qs_prev, optimize="optimal" if len(qs_prev) < 6 else "greedy")


def _marginalise_others(b: Array, deps: tuple[int, ...], f: int, qs_prev: Sequence[Array]) -> Array:
    """b: (T-1, n_i, n_deps...): contract every dependency except f with qs[dep][:-1] -> (T-1, n_i, n_f)."""
    others = [(j, d) for j, d in enumerate(deps) if d != f]
    if not others:
        return b
    letters = string.ascii_letters
    sub = letters[: b.ndim]
    subs = [sub] + [sub[0] + sub[2 + j] for j, _ in others]
    out = sub[:2] + sub[2 + deps.index(f)]
    return jnp.einsum(",".join(subs) + "->" + out, b, *[qs_prev[d] for _, d in others])


@dataclass(frozen=True)
class LoopedTransitions:
    """Baseline transition messages: pymdp ``get_vmp_messages`` / ``get_mmp_messages``, looped per factor."""

    padded: ClassVar[bool] = False  # messages on the list of posteriors (no ``vmp_messages_padded``)

    structure: ModelStructure
    has_B: bool

    @classmethod
    def prepare(cls, structure: ModelStructure, B: Optional[Sequence[np.ndarray]], dtype: Any) -> tuple["LoopedTransitions", dict]:
        """B[f]: (b, n_f, n_deps..., u_f) -> params {"B": [...], "log_B": [...]} (empty when B is None)."""
        if B is None:
            return cls(structure, False), {}
        return cls(structure, True), {
            "B": [jnp.asarray(b, dtype=dtype) for b in B],
            "log_B": [jnp.asarray(log_stable_np(b), dtype=dtype) for b in B],
        }

    def condition(self, params: dict, actions: Array) -> Any:
        """actions: (T-1, F) int -> per factor (T-1, n_f, n_deps...) B and log B."""
        if not self.has_B:
            return None
        pairs = [select_transitions(b, lb, actions[:, f]) for f, (b, lb) in enumerate(zip(params["B"], params["log_B"]))]
        return {"B": [p[0] for p in pairs], "log_B": [p[1] for p in pairs]}

    def vmp_messages(self, params: dict, cond: Any, qs: Sequence[Array], ln_prior: Sequence[Array], trans_valid: Array):
        """qs[f]: (T, n_f) -> (lnB_future, lnB_past), lists of (T, n_f)."""
        if not self.has_B:
            return [0.0] * len(qs), [0.0] * len(qs)
        deps_all = self.structure.B_dependencies
        F = len(qs)
        start, _ = _start_masks(trans_valid)
        qs_prev = [q[:-1] for q in qs]
        qs_next = [q[1:] for q in qs]
        inv = _inverse_B_deps(deps_all, F)
        future, past = [], []
        for f in range(F):
            msg = _forward_contract(cond["log_B"][f], [qs_prev[d] for d in deps_all[f]])
            msg = jnp.where(trans_valid[:, None], msg, 0.0)
            msg = jnp.concatenate([ln_prior[f][None], msg], axis=0)
            future.append(jnp.where(start[:, None], jnp.broadcast_to(ln_prior[f][None], msg.shape), msg))
        for f in range(F):
            msg = 0.0
            for i in inv[f]:
                ln_b = _marginalise_others(cond["log_B"][i], deps_all[i], f, qs_prev)
                msg = msg + jnp.einsum("ti,tij->tj", qs_next[i], ln_b)
            msg = jnp.where(trans_valid[:, None], msg, 0.0)
            past.append(jnp.pad(msg, ((0, 1), (0, 0))))
        return future, past

    def mmp_messages(self, params: dict, cond: Any, qs: Sequence[Array], ln_prior: Sequence[Array], trans_valid: Array):
        """qs[f]: (T, n_f) -> (lnB_future, lnB_past), lists of (T, n_f) (half-weighted, as pymdp)."""
        if not self.has_B:
            return [lp[None] for lp in ln_prior], [0.0] * len(qs)
        deps_all = self.structure.B_dependencies
        F = len(qs)
        start, outgoing = _start_masks(trans_valid)
        qs_prev = [q[:-1] for q in qs]
        qs_next = [q[1:] for q in qs]
        inv = _inverse_B_deps(deps_all, F)
        future, past = [], []
        for f in range(F):
            msg = log_stable(_forward_contract(cond["B"][f], [qs_prev[d] for d in deps_all[f]]))
            msg = jnp.where(trans_valid[:, None], msg, 0.0)
            msg = jnp.concatenate([ln_prior[f][None], msg], axis=0)
            msg = jnp.where(start[:, None], jnp.broadcast_to(ln_prior[f][None], msg.shape), msg)
            future.append(msg * jnp.where(outgoing[:, None], 0.5, 1.0))
        for f in range(F):
            msg = 0.0
            for i in inv[f]:
                b = _marginalise_others(cond["B"][i], deps_all[i], f, qs_prev)
                b_norm = b / jnp.clip(b.sum(-1, keepdims=True), min=MINVAL)
                msg = msg + log_stable(jnp.einsum("ti,tij->tj", qs_next[i], b_norm)) * 0.5
            msg = jnp.where(trans_valid[:, None], msg, 0.0)
            past.append(jnp.pad(msg, ((0, 1), (0, 0))))
        return future, past
