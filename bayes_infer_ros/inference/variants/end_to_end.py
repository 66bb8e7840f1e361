"""The paper's END-TO-END variants (Table "variants", Appendix A): ``end_to_end``, ``sparse_end_to_end``,
``clustered_end_to_end``, for FPI, VMP and MMP.

Axis-aligned merging with ONE lagging width per merged tensor, so a padded posterior can be contracted
against ANY lagging axis and the marginalisation step stays merged (no deconstruction into per-modality
log-likelihoods, unlike the hybrid variants):

* ``end_to_end``: every modality in one tensor ``log Ā`` of shape ``(M, max m, n_max, ..., n_max)``
  (k = longest A-dependency list axes). A modality with fewer than k dependencies sits at index 0 of the
  trailing axes, which are contracted against the one-hot ``e_0``.
* ``sparse_end_to_end``: the same tensor stored as one BCOO (``jax.experimental.sparse``, no batch axes:
  nse = the non-zeros of the whole merged log A, padding never stored); ``nse`` is static, part of the plan
  and of the compiled shape. Only the log-likelihood contraction is sparse; its per-call output is dense.
  ``bcoo_dot_general`` can keep the modality axis only as a BCOO *batch* axis, which pads every modality
  to the largest one's nse (10-20x more stored values on generator models), so the contraction runs on
  the BCOO's own (data, indices): one gather of the observations and one segment_sum.
* ``clustered_end_to_end``: rank-based clustering (modalities grouped by dependency-list length, the
  paper's Sec. III-D); each cluster merged end-to-end with its own width (the largest state dimension
  among its dependencies), so no trailing dummy axes and far less padding.

Posteriors live as ONE zero-padded ``(F, n_max)`` array (``(T, F, n_max)`` for VMP/MMP) throughout the
one driver of ``algorithms.py`` (its padded layout); the softmax runs on ``-inf``-masked padding, so padded
probabilities are exact zeros. The all-but-one marginals of each cluster are computed by divide and conquer (two
contractions of the full tensor per level instead of k), and the per-(modality, slot) contributions are
summed into their factors by one 0/1 incidence matmul (adds exact zeros only). Transition messages come
from :class:`~.transitions.MergedTransitions` (merged, arbitrary B-dependencies).

The math is pymdp 1.0.4's (``run_factorized_fpi``, ``update_marginals`` with ``get_vmp_messages`` /
``get_mmp_messages``; ``log_stable`` clip at MINVAL, softmax, mirror-descent step); only the summation
order inside contractions differs (rounding level).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import sparse as jsparse

from ...model.generative_model import ModelStructure
from ..merging.axis_aligned import axis_aligned_plan, merge_arrays, stack_vectors
from ..numerics import log_stable_np
from ..sizes import check_end_to_end, end_to_end_elements, end_to_end_groups
from .transitions import all_but_one

Array = jax.Array

__all__ = [
    "EndToEndCluster", "EndToEndLikelihood", "SparseEndToEndLikelihood", "ClusteredEndToEndLikelihood",
]


@dataclass(frozen=True)
class EndToEndCluster:
    """One merged tensor (static only).

    modalities: (M_c,) modality indices
    deps:       M_c tuples: each modality's real dependencies (axes 0..k_i-1 of its slab)
    rank:       k_c, number of lagging axes (longest dependency list in the cluster)
    width:      every lagging axis is padded to this size (end-to-end: one width per tensor)
    obs_width:  max m_i in the cluster
    nse:        BCOO stored entries of the cluster's merged tensor (0: dense storage)
    """

    modalities: tuple[int, ...]
    deps: tuple[tuple[int, ...], ...]
    rank: int
    width: int
    obs_width: int
    nse: int = 0

    @property
    def lagging_size(self) -> int:
        return self.width ** self.rank

    def dep_table(self, num_factors: int) -> np.ndarray:
        """(M_c, rank) factor index per slot; ``num_factors`` marks a trailing dummy slot (one-hot e_0)."""
        table = np.full((len(self.modalities), self.rank), num_factors, dtype=np.int32)
        for r, d in enumerate(self.deps):
            table[r, : len(d)] = d
        return table


@dataclass(frozen=True)
class EndToEndLikelihood:
    """LikelihoodOps of ``end_to_end`` (one merged tensor, global width n_max).

    params (leading engine batch axis b on every leaf):
      dense:  "log_A": per cluster (b, M_c, m_c, W_c ** k_c) padded log A (0 in the padding)
      sparse: "data": per cluster (b, nse), "indices": (b, nse, 3) int32 BCOO of (M_c, m_c, W_c ** k_c)
    """

    padded: ClassVar[bool] = True  # ``marginals_padded`` on the (…, F, n_max) posterior
    folds_prior: ClassVar[bool] = False

    num_states: tuple[int, ...]
    num_obs: tuple[int, ...]
    n_max: int
    clusters: tuple[EndToEndCluster, ...]
    slot_targets: tuple[int, ...]  # factor receiving each (cluster, modality, slot) contribution; -1: dummy

    SPARSE = False
    CLUSTERED = False

    # ---- build --------------------------------------------------------------------------------
    @classmethod
    def planned_elements(cls, structure: ModelStructure, nonzeros: np.ndarray) -> int:
        """Stored elements of the prepared arrays for one model, from the plan (see ``sizes``)."""
        return end_to_end_elements(structure, cls.CLUSTERED, cls.SPARSE, nonzeros)

    @classmethod
    def prepare(cls, structure: ModelStructure, A: Sequence[np.ndarray], dtype: Any) -> tuple["EndToEndLikelihood", dict]:
        """A[i]: (b, m_i, n_deps...) -> (ops, params). Padding, merging and BCOO conversion happen here."""
        ns = tuple(int(n) for n in structure.num_states)
        deps_all = structure.A_dependencies
        clusters, log_A, data, indices = [], [], [], []
        for members in end_to_end_groups(structure, cls.CLUSTERED):
            check_end_to_end(cls.__name__, structure, members)
            plan = axis_aligned_plan([structure.num_obs[i] for i in members],
                                     [tuple(ns[f] for f in deps_all[i]) for i in members], global_max=True)
            # one width for every lagging axis: the paper's global n_max (over the cluster's dependencies)
            width = plan.padded_lagging[0]
            rank = len(plan.padded_lagging)
            merged = merge_arrays(plan, [log_stable_np(np.asarray(A[i], dtype=np.float64)) for i in members], fill=0.0)
            b, M_c, m_c = merged.shape[:3]
            flat = merged.reshape(b, M_c, m_c, width ** rank)
            nse = 0
            if cls.SPARSE:
                nse, d, ix = _to_bcoo_arrays(flat)
                data.append(jnp.asarray(d, dtype=dtype))
                indices.append(jnp.asarray(ix))
            else:
                log_A.append(jnp.asarray(flat, dtype=dtype))
            clusters.append(EndToEndCluster(tuple(members), tuple(deps_all[i] for i in members), rank, width, m_c, nse))
        targets = tuple(
            (c.deps[r][j] if j < len(c.deps[r]) else -1)
            for c in clusters for r in range(len(c.modalities)) for j in range(c.rank)
        )
        ops = cls(ns, tuple(int(m) for m in structure.num_obs), max(ns), tuple(clusters), targets)
        params = {"data": data, "indices": indices} if cls.SPARSE else {"log_A": log_A}
        return ops, params

    # ---- per step, one model --------------------------------------------------------------------
    def _merge_obs(self, c: EndToEndCluster, obs: Sequence[Array]) -> Array:
        """obs[i]: (..., m_i) -> (..., M_c, m_c) zero-padded."""
        return stack_vectors([obs[i] for i in c.modalities], c.obs_width)

    def _cluster_ll(self, params: dict, k: int, c: EndToEndCluster, obs_c: Array) -> Array:
        """obs_c: (M_c, m_c) -> (M_c, W, ..., W): sum_o obs[o] log A[o, ...] (pymdp's xlogy form)."""
        if self.SPARSE:
            mat = jsparse.BCOO((params["data"][k], params["indices"][k]),
                               shape=(len(c.modalities), c.obs_width, c.lagging_size))
            rows, levels, cols = mat.indices[:, 0], mat.indices[:, 1], mat.indices[:, 2]
            ll = jax.ops.segment_sum(mat.data * obs_c[rows, levels], rows * c.lagging_size + cols,
                                     num_segments=len(c.modalities) * c.lagging_size)
        else:
            ll = jnp.einsum("mop,mo->mp", params["log_A"][k], obs_c)
        return ll.reshape((len(c.modalities),) + (c.width,) * c.rank)

    def log_likelihoods(self, params: dict, obs: Sequence[Array]) -> list[Array]:
        """obs[i]: (m_i,) -> per cluster (M_c, W_c, ..., W_c), kept merged."""
        return [self._cluster_ll(params, k, c, self._merge_obs(c, obs)) for k, c in enumerate(self.clusters)]

    def marginals_padded(self, ll: Sequence[Array], Q: Array) -> Array:
        """Q: (..., F, n_max) padded posteriors (exact zeros in the padding); ll[c]: (..., M_c, W_c, ...)
        with the same leading axes (e.g. time) -> (..., F, n_max) likelihood messages (pymdp
        ``all_marginal_log_likelihood``, padded; entries past n_f are unspecified).

        Leading axes are folded into the modality batch axis, so every contraction is one canonical
        batched mat-vec (see ``transitions.all_but_one``) over all time steps and modalities at once.
        """
        F = len(self.num_states)
        lead = Q.shape[:-2]
        Qf = Q.reshape((-1,) + Q.shape[-2:])  # (L, F, n_max)
        L = Qf.shape[0]
        parts = []
        for ll_c, c in zip(ll, self.clusters):
            M_c = len(c.modalities)
            if c.rank == 1:
                msgs = ll_c.reshape(L, M_c, 1, c.width)
            else:
                x = ll_c.reshape((L * M_c,) + (c.width,) * c.rank)
                msgs = jnp.stack(all_but_one(x, self._slot_vectors(c, Qf)), axis=1)
            msgs = msgs.reshape(L, M_c * c.rank, c.width)
            parts.append(jnp.pad(msgs, ((0, 0), (0, 0), (0, self.n_max - c.width))))
        stacked = jnp.concatenate(parts, axis=1) if len(parts) > 1 else parts[0]  # (L, R, n_max)
        targets = np.asarray(self.slot_targets)
        incidence = np.zeros((F, len(targets)), dtype=np.dtype(stacked.dtype))
        real = targets >= 0
        incidence[targets[real], np.nonzero(real)[0]] = 1.0
        out = jnp.einsum("fr,lrn->lfn", incidence, stacked)
        return out.reshape(lead + (F, self.n_max))

    @staticmethod
    def _slot_vectors(c: EndToEndCluster, Qf: Array) -> list[Array]:
        """Qf: (L, F, n_max) -> per slot j, (L * M_c, W): the posterior feeding slot j of every modality
        (one-hot e_0 for a trailing dummy slot). One 0/1 multiply-and-reduce selects every slot's posteriors (exact:
        it adds zeros only; XLA:CPU fuses it into the loop's kernels, where a dot would be a call of its own); a
        gather here gets fused into the dot_generals that consume it and makes them ~10x slower on XLA:CPU, and a
        slice per modality makes the program grow with M."""
        L, F = Qf.shape[0], Qf.shape[1]
        M_c = len(c.deps)
        select = np.zeros((M_c, c.rank, F + 1), dtype=np.dtype(Qf.dtype))
        table = c.dep_table(F)  # F marks a dummy slot: it selects the appended e_0 row
        select[np.arange(M_c)[:, None], np.arange(c.rank)[None, :], table] = 1.0
        e0 = jnp.broadcast_to(jnp.asarray(np.eye(1, Qf.shape[2], dtype=np.dtype(Qf.dtype)))[None], (L, 1, Qf.shape[2]))
        q = (select[None, :, :, :, None] * jnp.concatenate([Qf, e0], axis=1)[:, None, None, :, :]).sum(axis=3)
        return [q[:, :, j, : c.width].reshape(L * M_c, c.width) for j in range(c.rank)]

    def joint(self, params: dict, ll: Sequence[Array]) -> Array:
        """F == 1: sum over modalities of ll (n_0,). Every dependency list is (0,), so rank 1."""
        total = sum(x.sum(axis=0) for x in ll)
        return total[: self.num_states[0]]


@dataclass(frozen=True)
class SparseEndToEndLikelihood(EndToEndLikelihood):
    """``sparse_end_to_end``: the merged log A as one BCOO (static nse, padding never stored)."""

    SPARSE = True


@dataclass(frozen=True)
class ClusteredEndToEndLikelihood(EndToEndLikelihood):
    """``clustered_end_to_end``: rank-clustered, one end-to-end merged tensor per dependency length."""

    CLUSTERED = True


def _to_bcoo_arrays(flat: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    """flat: (b, M, m, P) -> (nse, data (b, nse), indices (b, nse, 3)): one BCOO per model, no batch axes.

    nse is the largest non-zero count over the models of a batch (at least 1); a model with fewer stores
    explicit zeros at index (0, 0, 0), which add nothing.
    """
    b = flat.shape[0]
    nz = [np.nonzero(flat[k]) for k in range(b)]
    nse = max(1, max(len(z[0]) for z in nz))
    data = np.zeros((b, nse), dtype=flat.dtype)
    indices = np.zeros((b, nse, 3), dtype=np.int32)
    for k, z in enumerate(nz):
        data[k, : len(z[0])] = flat[k][z]
        indices[k, : len(z[0])] = np.stack(z, axis=-1)
    return nse, data, indices

