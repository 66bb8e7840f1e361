"""The six hybrid variants (paper Sec. IV, variants table rows 1-6).

Hybrid = the log-likelihood of all modalities is computed in MERGED form (one or a few big
contractions), immediately deconstructed, and the marginalisation is pymdp's per-modality one
(``all_marginal_log_likelihood``), run as one batched contraction per group of same-rank modalities
(``grouped.GroupedMarginals``) instead of one contraction per modality, so the program stays small as the
number of modalities grows.

=========================  ===============  ===========  =====================================
variant                    merging          storage      merge groups
=========================  ===============  ===========  =====================================
hybrid                     axis-aligned     dense        one (per-axis maxima)
sparse_hybrid              axis-aligned     BCOO         one
clustered_hybrid           axis-aligned     dense        one per A-rank (rank clustering)
hybrid_block               block-diagonal   dense        one
sparse_hybrid_block        block-diagonal   BCOO         one
clustered_hybrid_block     block-diagonal   dense        agglomerative clusters (elbow rule)
=========================  ===============  ===========  =====================================

What is merged is the precomputed log-tensor ``log A_i = log(clip(A_i, MINVAL))`` (pymdp's
``xlogy(obs, clip(A))`` with the log taken once at build time), padded with exact zeros: a padded
observation slot (0) times a padded entry (0) adds 0, so the merged contraction is exact up to summation
order. (pymdp's own ``compute_log_likelihoods_padded`` takes log(sum obs * A) instead, which differs from its
FPI for soft observations; we follow the FPI.)

Deconstruction: the merge groups' outputs, flattened and concatenated, are read into the marginal groups'
stacked, zero-padded log-likelihoods ``(M_g, N_1, ..., N_k)`` by one gather with a static index (none where the
layouts coincide, as for clustered_hybrid's unsplit rank clusters), then static slices; padding reads an
appended zero. Posteriors travel as one zero-padded ``(F, n_max)`` array (the driver's padded layout).

Beyond the paper (exact): every modality's lagging axes are relabelled by decreasing size before
merging (``sizes.size_sorted_axes``), which shrinks the per-axis-maxima padding (often by 10x or more);
the marginal groups carry the order. VMP/MMP vmap the one-step contraction over the window, so there it is
one matrix-matrix product per merge group.
Transition messages are the merged axis-aligned ones (``transitions.MergedTransitions``).

Plans (clusters, padded shapes, block offsets, marginal groups, BCOO shape and nse) are decided once in
``prepare`` from the model's shapes; only the BCOO nse depends on values (max over the batch). The ops are
frozen dataclasses of static ints/tuples; the arrays live in ``params``:

- dense axis-aligned: ``params["groups"][g]``: (b, M_g, max m, N_1, ..., N_k)
- dense block:        ``params["groups"][g]``: (b, sum p_i, sum m_i)
- BCOO (either):      ``params["groups"][g]``: {"data": (b, nse), "indices": (b, nse, 2)}
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar, Generic, Sequence, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from ...model.generative_model import ModelStructure
from ..merging import axis_aligned as aa
from ..merging import block_diagonal as bd
from ..merging.sparse import BCOOPlan, bcoo_from_blocks, bcoo_matvec
from ..numerics import log_stable_np
from ..sizes import check_hybrid_dense, hybrid_elements, hybrid_plan, size_sorted_axes
from .grouped import GroupedMarginals

Array = jax.Array
Clusters = tuple[tuple[int, ...], ...]
Plan = TypeVar("Plan", aa.AxisAlignedPlan, bd.BlockDiagonalPlan)

__all__ = [
    "AxisAlignedHybrid", "BlockDiagonalHybrid",
    "HybridLikelihood", "SparseHybridLikelihood", "ClusteredHybridLikelihood",
    "HybridBlockLikelihood", "SparseHybridBlockLikelihood", "ClusteredHybridBlockLikelihood",
]


def _log_tensors(A: Sequence[np.ndarray], dtype: Any) -> list[np.ndarray]:
    """Bit-identical to the baseline's log-tensors: host log in A's dtype, then cast."""
    return [log_stable_np(a).astype(np.dtype(dtype)) for a in A]


@dataclass(frozen=True)
class _GroupedHybrid(Generic[Plan]):
    """What the six hybrids share: merge groups for the log-likelihood, marginal groups for the messages.

    structure:   the model structure
    groups:      modality indices of each merge group (one group unless clustered)
    plans:       one merge plan per merge group
    axis_orders: each modality's lagging axes in size order (``sizes.size_sorted_axes``)
    marginal:    the marginal groups (``grouped.GroupedMarginals``)
    bcoo:        one BCOOPlan per merge group when stored sparse, else ()

    Subclasses set ``block`` (block-diagonal, else axis-aligned merging), ``clustered`` and ``sparse``, and
    say how one group is merged (``_merge_dense``, ``_merge_bcoo``), contracted into its flat output
    (``_contract``) and where each member's entries sit in that output (``_positions``, ``_flat_size``); the
    planning (``sizes.hybrid_plan``), the size-sorted log-tensors and the deconstruction are shared.
    """

    structure: ModelStructure
    groups: Clusters
    plans: tuple[Plan, ...]
    axis_orders: tuple[tuple[int, ...], ...]
    marginal: GroupedMarginals
    bcoo: tuple[BCOOPlan, ...] = ()

    sparse: ClassVar[bool] = False
    clustered: ClassVar[bool] = False
    block: ClassVar[bool] = False
    padded: ClassVar[bool] = True  # ``marginals_padded`` on the (…, F, n_max) posterior
    folds_prior: ClassVar[bool] = False  # no ``fold_prior``: the driver adds FPI's log prior each iteration

    @property
    def num_states(self) -> tuple[int, ...]:
        return tuple(self.structure.num_states)

    @property
    def n_max(self) -> int:
        return max(self.structure.num_states)

    def marginals_padded(self, ll: Array, Q: Array) -> Array:
        """Q: (..., F, n_max) padded posteriors; ll: ``log_likelihoods``' (..., sum of the groups' sizes) -> (..., F,
        n_max)."""
        return self.marginal.marginals_padded(self._split(ll), Q)

    def joint(self, params: dict, ll: Array) -> Array:
        """Single-factor models: the summed log-likelihood (n_0,)."""
        return self.marginal.joint(self._split(ll))

    @classmethod
    def plan(cls, structure: ModelStructure) -> tuple[Clusters, tuple[Any, ...]]:
        """Modality groups and one merge plan per group, from the shapes only (lagging axes size-sorted)."""
        return hybrid_plan(structure, cls.block, cls.clustered)

    @classmethod
    def planned_elements(cls, structure: ModelStructure, nonzeros: np.ndarray) -> int:
        """Stored elements of the prepared arrays for one model, from the plan (see ``sizes``)."""
        return hybrid_elements(structure, cls.block, cls.clustered, cls.sparse, nonzeros)

    @classmethod
    def _plan_and_log_tensors(cls, structure: ModelStructure, A: Sequence[np.ndarray], dtype: Any):
        """(groups, plans, axis orders, log A[i] (b, m_i, lagging axes in size order)); refuses oversized dense merges."""
        groups, plans = cls.plan(structure)
        if not cls.sparse:
            check_hybrid_dense(cls.__name__, plans)
        orders = size_sorted_axes(structure)
        log_A = [np.transpose(la, (0, 1) + tuple(2 + j for j in o)) for la, o in zip(_log_tensors(A, dtype), orders)]
        return groups, plans, orders, log_A

    @classmethod
    def prepare(cls, structure: ModelStructure, A: Sequence[np.ndarray], dtype: Any) -> tuple["_GroupedHybrid", dict]:
        """A[i]: (b, m_i, n_deps...) -> (ops, {"groups": [...]}) (see the module docstring)."""
        groups, plans, orders, log_A = cls._plan_and_log_tensors(structure, A, dtype)
        arrays, bcoo_plans = [], []
        for g, plan in zip(groups, plans):
            if cls.sparse:
                bplan, parts = cls._merge_bcoo(plan, [log_A[i] for i in g])
                bcoo_plans.append(bplan)
                arrays.append({k: jnp.asarray(v) for k, v in parts.items()})
            else:
                arrays.append(jnp.asarray(cls._merge_dense(plan, [log_A[i] for i in g])))
        ops = cls(structure, groups, plans, orders, GroupedMarginals.plan(structure), tuple(bcoo_plans))
        return ops, {"groups": arrays}

    def log_likelihoods(self, params: dict, obs: Sequence[Array]) -> Array:
        """obs[i]: (m_i,) -> every marginal group's (M_g, N_1, ..., N_k), flattened and concatenated: one contraction
        per merge group, then one gather into the groups' layout (none where the layouts coincide). The groups are
        split off by static slices where the messages use them (``_split``): one consumer keeps a small model's
        program a chain of steps, which XLA:CPU runs in the caller's thread."""
        flats = []
        for k, (g, plan) in enumerate(zip(self.groups, self.plans)):
            bcoo = self.bcoo[k] if self.bcoo else None
            flats.append(self._contract(plan, bcoo, params["groups"][k], [obs[i] for i in g]))
        flat = jnp.concatenate(flats + [jnp.zeros((1,), dtype=flats[0].dtype)])
        index = np.concatenate([x.reshape(-1) for x in self._deconstruction])
        if np.array_equal(index, np.arange(index.size)):
            return flat[:index.size]
        return flat[jnp.asarray(index, dtype=jnp.int32)]

    def _split(self, ll: Array) -> list[Array]:
        """(..., sum of the groups' sizes) -> per marginal group (..., M_g, N_1, ..., N_k)."""
        out, start = [], 0
        for x in self._deconstruction:
            out.append(ll[..., start:start + x.size].reshape(ll.shape[:-1] + x.shape))
            start += x.size
        return out

    @cached_property
    def _deconstruction(self) -> tuple[np.ndarray, ...]:
        """Per marginal group, (M_g, N_1, ..., N_k) positions in the concatenated merge outputs (their total
        length, the appended zero, in the padding). Static: computed once per ops object."""
        base, where = 0, {}
        for g, plan in zip(self.groups, self.plans):
            for r, i in enumerate(g):
                where[i] = base + self._positions(plan, r)
            base += self._flat_size(plan)
        out = []
        for grp in self.marginal.groups:
            index = np.full((len(grp.modalities),) + grp.shape, base, dtype=np.int64)
            for r, i in enumerate(grp.modalities):
                pos = where[i]
                index[(r,) + tuple(slice(0, n) for n in pos.shape)] = pos
            out.append(index)
        return tuple(out)

    @staticmethod
    def _merge_dense(plan: Plan, log_A: Sequence[np.ndarray]) -> np.ndarray:
        """One group's log-tensors (b, m_i, lagging...) merged into its dense array."""
        raise NotImplementedError

    @staticmethod
    def _merge_bcoo(plan: Plan, log_A: Sequence[np.ndarray]) -> tuple[BCOOPlan, dict]:
        """One group's log-tensors (b, m_i, lagging...) as a BCOO matrix: (its plan, its arrays)."""
        raise NotImplementedError

    @staticmethod
    def _contract(plan: Plan, bcoo: BCOOPlan | None, merged: Any, obs: Sequence[Array]) -> Array:
        """One group's observations (m_i,) -> its flat merged output, through the merged array (BCOO when ``bcoo``)."""
        raise NotImplementedError

    @staticmethod
    def _positions(plan: Plan, r: int) -> np.ndarray:
        """Where the group's r-th member's entries (its lagging shape) sit in the group's flat output."""
        raise NotImplementedError

    @staticmethod
    def _flat_size(plan: Plan) -> int:
        """Length of the group's flat output."""
        raise NotImplementedError


# ---- axis-aligned ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class AxisAlignedHybrid(_GroupedHybrid[aa.AxisAlignedPlan]):
    """Axis-aligned merged log-likelihood (one contraction per merge group) + grouped marginals."""

    @staticmethod
    def _merge_dense(plan: aa.AxisAlignedPlan, log_A: Sequence[np.ndarray]) -> np.ndarray:
        return aa.merge_arrays(plan, log_A)

    @staticmethod
    def _merge_bcoo(plan: aa.AxisAlignedPlan, log_A: Sequence[np.ndarray]) -> tuple[BCOOPlan, dict]:
        return _axis_aligned_bcoo(plan, log_A)

    @staticmethod
    def _contract(plan: aa.AxisAlignedPlan, bcoo: BCOOPlan | None, merged: Any, obs: Sequence[Array]) -> Array:
        obs_padded = aa.merge_vectors(plan, obs)  # (M_g, max m)
        if bcoo is not None:
            return bcoo_matvec(bcoo, merged, obs_padded.reshape(-1))
        return aa.merged_contract(merged, obs_padded).reshape(-1)

    @staticmethod
    def _positions(plan: aa.AxisAlignedPlan, r: int) -> np.ndarray:
        return aa.flat_positions(plan, r)

    @staticmethod
    def _flat_size(plan: aa.AxisAlignedPlan) -> int:
        return plan.num_items * int(np.prod(plan.padded_lagging, dtype=np.int64))


def _axis_aligned_bcoo(plan: aa.AxisAlignedPlan, log_A: Sequence[np.ndarray]) -> tuple[BCOOPlan, dict]:
    """The padded tensor as a (M * prod N, M * max m) BCOO matrix, built from the unpadded blocks."""
    P = int(np.prod(plan.padded_lagging, dtype=np.int64))
    k = len(plan.padded_lagging)
    blocks, rows, cols = [], [], []
    for i, la in enumerate(log_A):
        lag = plan.lagging_shapes[i]
        b = la.shape[0]
        blocks.append(la.reshape(b, plan.lead_sizes[i], -1))
        if k == 0:
            local = np.zeros(1, dtype=np.int64)
        else:
            grid = np.indices(lag).reshape(len(lag), -1) if lag else np.zeros((0, 1), dtype=np.int64)
            grid = np.concatenate([grid, np.zeros((k - len(lag), grid.shape[1]), dtype=grid.dtype)])
            local = np.ravel_multi_index(tuple(grid), plan.padded_lagging)
        rows.append(i * P + local)
        cols.append(i * plan.padded_lead + np.arange(plan.lead_sizes[i]))
    shape = (plan.num_items * P, plan.num_items * plan.padded_lead)
    return bcoo_from_blocks(blocks, rows, cols, shape)


# ---- block-diagonal -------------------------------------------------------------------------------
@dataclass(frozen=True)
class BlockDiagonalHybrid(_GroupedHybrid[bd.BlockDiagonalPlan]):
    """Block-diagonal merged log-likelihood (one matvec per merge group) + grouped marginals."""

    block: ClassVar[bool] = True

    @staticmethod
    def _merge_dense(plan: bd.BlockDiagonalPlan, log_A: Sequence[np.ndarray]) -> np.ndarray:
        return bd.merge_arrays(plan, log_A)

    @staticmethod
    def _merge_bcoo(plan: bd.BlockDiagonalPlan, log_A: Sequence[np.ndarray]) -> tuple[BCOOPlan, dict]:
        r, c = plan.row_offsets, plan.col_offsets
        blocks = [la.reshape(la.shape[0], la.shape[1], -1) for la in log_A]
        rows = [np.arange(r[j], r[j + 1]) for j in range(len(log_A))]
        cols = [np.arange(c[j], c[j + 1]) for j in range(len(log_A))]
        return bcoo_from_blocks(blocks, rows, cols, plan.merged_shape)

    @staticmethod
    def _contract(plan: bd.BlockDiagonalPlan, bcoo: BCOOPlan | None, merged: Any, obs: Sequence[Array]) -> Array:
        o = bd.concat_vectors(obs)
        return bcoo_matvec(bcoo, merged, o) if bcoo is not None else merged @ o

    @staticmethod
    def _positions(plan: bd.BlockDiagonalPlan, r: int) -> np.ndarray:
        return bd.flat_positions(plan, r)

    @staticmethod
    def _flat_size(plan: bd.BlockDiagonalPlan) -> int:
        return int(plan.row_offsets[-1])


# ---- the six registered variants -------------------------------------------------------------------
def _variant(name: str, merging: type[_GroupedHybrid], *, sparse: bool = False,
             clustered: bool = False) -> type[_GroupedHybrid]:
    """The registered variant ``name``: ``merging`` (``AxisAlignedHybrid`` or ``BlockDiagonalHybrid``) with its
    storage (BCOO when ``sparse``) and its merge groups (clusters when ``clustered``, else one)."""
    attrs = {"sparse": sparse, "clustered": clustered, "__module__": __name__, "__qualname__": name,
             "__doc__": f"{merging.__doc__} Stored {'as BCOO' if sparse else 'dense'}, "
                        f"{'clustered merge groups' if clustered else 'one merge group'}."}
    return dataclass(frozen=True)(type(name, (merging,), attrs))


HybridLikelihood = _variant("HybridLikelihood", AxisAlignedHybrid)
SparseHybridLikelihood = _variant("SparseHybridLikelihood", AxisAlignedHybrid, sparse=True)
ClusteredHybridLikelihood = _variant("ClusteredHybridLikelihood", AxisAlignedHybrid, clustered=True)
HybridBlockLikelihood = _variant("HybridBlockLikelihood", BlockDiagonalHybrid)
SparseHybridBlockLikelihood = _variant("SparseHybridBlockLikelihood", BlockDiagonalHybrid, sparse=True)
ClusteredHybridBlockLikelihood = _variant("ClusteredHybridBlockLikelihood", BlockDiagonalHybrid, clustered=True)
