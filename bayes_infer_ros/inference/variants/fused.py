"""The FUSED family (beyond the paper's nine): FPI, VMP and MMP as a handful of dense ops per iteration.

The likelihood message of factor f is linear in the other factors' posteriors for every modality that
depends on at most two factors, and linear in the observations (pymdp's ``xlogy`` form,
``ll_m = sum_o o[o] log A_m[o, ...]``). With posteriors kept as one zero-padded ``(F, n_max)`` array,
flattened to ``N = F * n_max``, FPI's update is exactly

    log q  <-  log D + u + W q  (+ h(q) for modalities depending on three or more factors)

followed by a softmax per factor over its real states. ``u`` (N,) collects the one-factor modalities and
``W`` (N, N) the two-factor ones: modality m on (f, g) puts ``ll_m`` in block (f, g) and its transpose in
block (g, f). Both are linear in the packed observation vector ``o`` (O = sum m_i), so they come from
build-time matrices in one matvec per call. ``h`` is the exact multilinear term of higher-order
modalities: their log A stacked per group of same-rank modalities (``grouped.GroupedMarginals``, lagging axes
size-sorted and zero-padded to per-axis maxima), one batched divide-and-conquer contraction per group.

* ``fused_dense``: ``[vec W; u] = G o`` with G (N*N + N, O) built once; every iteration is one (N, N)
  mat-vec and a masked softmax. Refuses (VariantUnsupported) when G exceeds ``MAX_G_ELEMENTS``.
* ``fused_pairwise``: no N^2 array. The two-factor modalities' log A are stacked (M2, m_max, n_max, n_max)
  and contracted with their observations once per call into blocks (M2, n_max, n_max); every iteration
  applies the blocks in both directions (two batched mat-vecs) and sums them into factors with 0/1
  incidence matmuls. Stored elements grow with the model, not with N^2.

VMP and MMP use the same likelihood form at every time step (``u_t``, ``W_t``; masked by ``valid_steps``
exactly as pymdp masks the log-likelihoods) and :class:`~.transitions.MergedTransitions` for the
transition messages (merged, arbitrary B-dependencies). They run under the one driver of ``algorithms.py``
with padded posteriors; ``fold_prior`` adds FPI's prior into ``u`` once per call.

Only the summation order inside contractions differs from pymdp (rounding level): the oracle tests hold
every variant to the tolerance table.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ...model.generative_model import ModelStructure
from ..merging.axis_aligned import stack_vectors
from ..numerics import log_stable_np
from ..sizes import check_fused_dense, check_grouped_dense, fused_elements, fused_partition, size_sorted_axes
from .grouped import GroupedMarginals

Array = jax.Array

__all__ = ["FusedDenseLikelihood", "FusedPairwiseLikelihood", "HigherOrderTerm"]


def _obs_offsets(num_obs: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(x) for x in np.concatenate([[0], np.cumsum(num_obs)]))


@dataclass(frozen=True)
class HigherOrderTerm:
    """The exact likelihood messages of modalities with three or more dependencies (static only).

    marginal:   their marginal groups (``grouped.GroupedMarginals``)
    obs_widths: per group, the largest m_i of its members
    params:     per group, the members' log A stacked, (b, M_g, m_g, N_1 * ... * N_k) (lagging axes size-sorted,
                zero-padded to the group's shape)
    """

    marginal: GroupedMarginals
    obs_widths: tuple[int, ...]

    @classmethod
    def prepare(cls, structure: ModelStructure, A: Sequence[np.ndarray], dtype: Any) -> tuple[Optional["HigherOrderTerm"], Any]:
        _, _, mods = fused_partition(structure)
        if not mods:
            return None, None
        check_grouped_dense("fused (higher-order term)", structure, mods)
        marginal = GroupedMarginals.plan(structure, mods)
        orders = size_sorted_axes(structure)
        b = int(np.shape(A[0])[0])
        params, widths = [], []
        for g in marginal.groups:
            m_g = max(structure.num_obs[i] for i in g.modalities)
            stacked = np.zeros((b, len(g.modalities), m_g) + g.shape)
            for r, i in enumerate(g.modalities):
                la = log_stable_np(np.asarray(A[i], dtype=np.float64))
                la = np.transpose(la, (0, 1) + tuple(2 + j for j in orders[i]))
                stacked[(slice(None), r) + tuple(slice(0, n) for n in la.shape[1:])] = la
            params.append(jnp.asarray(stacked.reshape(b, len(g.modalities), m_g, -1), dtype=dtype))
            widths.append(m_g)
        return cls(marginal, tuple(widths)), params

    def log_likelihoods(self, params: Any, obs: Sequence[Array]) -> list[Array]:
        """obs: every modality's (m_i,) -> per group (M_g, N_1, ..., N_k): one contraction per group."""
        out = []
        for g, width, log_A in zip(self.marginal.groups, self.obs_widths, params):
            o = stack_vectors([obs[i] for i in g.modalities], width)  # (M_g, m_g)
            out.append(jnp.einsum("mop,mo->mp", log_A, o).reshape((len(g.modalities),) + g.shape))
        return out

    def marginals_padded(self, ll: Any, Q: Array) -> Array:
        """Q: (..., F, n_max) -> (..., F, n_max) messages of these modalities."""
        return self.marginal.marginals_padded(ll, Q)


@dataclass(frozen=True)
class FusedLikelihood:
    """Shared build and messages of the fused variants (static only; arrays live in ``params``).

    num_states: (F,) n_f;  num_obs: (M,) m_i;  n_max: max n_f
    unary:      modalities with one dependency, unary_deps: the factor of each
    pair:       modalities with two dependencies, pair_deps: their (f, g)
    higher:     HigherOrderTerm or None
    """

    padded: ClassVar[bool] = True  # ``marginals_padded`` on the (…, F, n_max) posterior
    folds_prior: ClassVar[bool] = True  # ``fold_prior``: FPI's log prior joins the per-call term once

    num_states: tuple[int, ...]
    num_obs: tuple[int, ...]
    n_max: int
    unary: tuple[int, ...]
    unary_deps: tuple[int, ...]
    pair: tuple[int, ...]
    pair_deps: tuple[tuple[int, int], ...]
    higher: Optional[HigherOrderTerm]

    DENSE: ClassVar[bool] = True

    @classmethod
    def planned_elements(cls, structure: ModelStructure, nonzeros: np.ndarray) -> int:
        """Stored elements of the prepared arrays for one model, from the plan (see ``sizes``)."""
        return fused_elements(structure, cls.DENSE)

    @property
    def size(self) -> int:
        """N = F * n_max, the flattened padded posterior."""
        return len(self.num_states) * self.n_max

    # ---- build --------------------------------------------------------------------------------
    @classmethod
    def prepare(cls, structure: ModelStructure, A: Sequence[np.ndarray], dtype: Any) -> tuple["FusedLikelihood", dict]:
        """A[i]: (b, m_i, n_deps...) -> (ops, params); the build-time matrices are made here, once."""
        ns = tuple(int(n) for n in structure.num_states)
        deps_all = structure.A_dependencies
        unary, pair, _ = fused_partition(structure)
        n_max, F = max(ns), len(ns)
        N, O = F * n_max, int(sum(structure.num_obs))
        b = int(np.shape(A[0])[0])
        off = _obs_offsets(structure.num_obs)
        log_A = {i: log_stable_np(np.asarray(A[i], dtype=np.float64)) for i in unary + pair}
        params: dict = {}
        if cls.DENSE:
            check_fused_dense(structure)
            U = np.zeros((b, F, n_max, O))
            for i in unary:
                f, m = deps_all[i][0], structure.num_obs[i]
                # U[f, a, off_i + o] = log A_i[o, a]
                U[:, f, : ns[f], off[i]: off[i] + m] += np.transpose(log_A[i], (0, 2, 1))
            G = U.reshape(b, N, O)
            if pair:
                W = np.zeros((b, F, n_max, F, n_max, O))
                for i in pair:
                    f, g = deps_all[i]
                    blk = np.transpose(log_A[i], (0, 2, 3, 1))  # (b, n_f, n_g, m)
                    cols = slice(off[i], off[i] + structure.num_obs[i])
                    W[:, f, : ns[f], g, : ns[g], cols] += blk
                    W[:, g, : ns[g], f, : ns[f], cols] += np.transpose(blk, (0, 2, 1, 3))
                G = np.concatenate([W.reshape(b, N * N, O), G], axis=1)  # rows: vec W, then u
            params["G"] = jnp.asarray(G, dtype=dtype)
        else:
            if unary:
                m1 = max(structure.num_obs[i] for i in unary)
                la1 = np.zeros((b, len(unary), m1, n_max))
                for r, i in enumerate(unary):
                    la1[:, r, : structure.num_obs[i], : ns[deps_all[i][0]]] = log_A[i]
                params["log_A1"] = jnp.asarray(la1, dtype=dtype)
            if pair:
                m2 = max(structure.num_obs[i] for i in pair)
                la2 = np.zeros((b, len(pair), m2, n_max, n_max))
                for r, i in enumerate(pair):
                    f, g = deps_all[i]
                    la2[:, r, : structure.num_obs[i], : ns[f], : ns[g]] = log_A[i]
                params["log_A2"] = jnp.asarray(la2, dtype=dtype)
        higher, hparams = HigherOrderTerm.prepare(structure, A, dtype)
        if higher is not None:
            params["higher"] = hparams
        ops = cls(ns, tuple(int(m) for m in structure.num_obs), n_max, unary,
                  tuple(deps_all[i][0] for i in unary), pair,
                  tuple(tuple(deps_all[i]) for i in pair), higher)
        return ops, params

    # ---- static layout helpers ----------------------------------------------------------------
    def _stack_obs(self, obs: Sequence[Array], members: Sequence[int], width: int) -> Array:
        """obs[i]: (m_i,) -> (len(members), width) zero-padded."""
        return stack_vectors([obs[i] for i in members], width)

    def _incidence(self, targets: Sequence[int], dtype: Any) -> np.ndarray:
        """(F, R) 0/1: row f sums the contributions whose target is f."""
        out = np.zeros((len(self.num_states), len(targets)), dtype=np.dtype(dtype))
        out[np.asarray(targets), np.arange(len(targets))] = 1.0
        return out

    # ---- per step, one model ------------------------------------------------------------------
    def log_likelihoods(self, params: dict, obs: Sequence[Array]) -> dict:
        """obs[i]: (m_i,) -> {"u": (F, n_max), "W": (N, N) or "blocks": (M2, n_max, n_max), "higher": ...}."""
        F, n = len(self.num_states), self.n_max
        out: dict = {}
        if self.DENSE:
            o = jnp.concatenate(list(obs))
            y = params["G"] @ o
            out["u"] = y[: F * n].reshape(F, n) if not self.pair else y[self.size * self.size:].reshape(F, n)
            if self.pair:
                out["W"] = y[: self.size * self.size].reshape(self.size, self.size)
        else:
            if self.unary:
                o1 = self._stack_obs(obs, self.unary, params["log_A1"].shape[1])
                rows = jnp.einsum("rmn,rm->rn", params["log_A1"], o1)  # (M1, n_max)
                out["u"] = jnp.asarray(self._incidence(self.unary_deps, rows.dtype)) @ rows
            else:
                out["u"] = jnp.zeros((F, n), dtype=obs[0].dtype)
            if self.pair:
                o2 = self._stack_obs(obs, self.pair, params["log_A2"].shape[1])
                out["blocks"] = jnp.einsum("rmab,rm->rab", params["log_A2"], o2)  # (M2, n_max, n_max)
        if self.higher is not None:
            out["higher"] = self.higher.log_likelihoods(params["higher"], obs)
        return out

    def marginals_padded(self, ll: dict, Q: Array) -> Array:
        """Q: (..., F, n_max) padded posteriors (zeros in the padding) -> (..., F, n_max) likelihood
        messages (pymdp ``all_marginal_log_likelihood``, padded; entries past n_f unspecified).
        ``ll`` carries the same leading axes as Q."""
        lead = Q.shape[:-2]
        F, n = len(self.num_states), self.n_max
        msg = ll["u"]
        if self.pair:
            if self.DENSE:
                q = Q.reshape(lead + (F * n,))
                # multiply-and-reduce rather than a dot: XLA:CPU fuses it into the loop's kernels instead of
                # calling a library mat-vec every iteration (a few us per call at these sizes)
                msg = msg + (ll["W"] * q[..., None, :]).sum(axis=-1).reshape(lead + (F, n))
            else:
                fs = [d[0] for d in self.pair_deps]
                gs = [d[1] for d in self.pair_deps]
                E_f = self._incidence(fs, Q.dtype)  # (F, M2)
                E_g = self._incidence(gs, Q.dtype)
                q_f = jnp.einsum("fr,...fn->...rn", E_f, Q)  # (..., M2, n)
                q_g = jnp.einsum("fr,...fn->...rn", E_g, Q)
                to_f = jnp.einsum("...rab,...rb->...ra", ll["blocks"], q_g)
                to_g = jnp.einsum("...rab,...ra->...rb", ll["blocks"], q_f)
                msg = msg + jnp.einsum("fr,...rn->...fn", E_f, to_f) + jnp.einsum("fr,...rn->...fn", E_g, to_g)
        if self.higher is not None:
            msg = msg + self.higher.marginals_padded(ll["higher"], Q)
        return msg

    def fold_prior(self, ll: dict, log_prior: Array) -> dict:
        """FPI's constant prior (F, n_max) added into ``u`` once per call instead of once per iteration."""
        return dict(ll, u=ll["u"] + log_prior)

    # ---- single factor (pymdp's one-pass FPI) ---------------------------------------------------
    def joint(self, params: dict, ll: dict) -> Array:
        return ll["u"][0, : self.num_states[0]]


@dataclass(frozen=True)
class FusedDenseLikelihood(FusedLikelihood):
    """``fused_dense``: u and W from one build-time matrix G, one (N, N) mat-vec per iteration."""

    DENSE: ClassVar[bool] = True


@dataclass(frozen=True)
class FusedPairwiseLikelihood(FusedLikelihood):
    """``fused_pairwise``: per-modality (n_max, n_max) blocks applied both ways, no N^2 storage."""

    DENSE: ClassVar[bool] = False

