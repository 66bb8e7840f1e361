"""The six hybrid variants (paper Sec. IV, variants table rows 1-6).

Hybrid = the log-likelihood of all modalities is computed in MERGED form (one or a few big
contractions), immediately deconstructed into per-modality tensors ``ll_i`` (n_deps_i...), and the
marginalisation stays pymdp's looped one (``reference.marginal_contributions``).

=========================  ===============  ===========  =====================================
variant                    merging          storage      groups
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
observation slot (0) times a padded entry (0) adds 0, and padded lagging entries are cropped away, so
the merged contraction is exact up to summation order. (pymdp's own ``compute_log_likelihoods_padded``
takes log(sum obs * A) instead, which differs from its FPI for soft observations; we follow the FPI.)

Beyond the paper (exact): every modality's lagging axes are relabelled by decreasing size before
merging (``sizes.size_sorted_axes``), which shrinks the per-axis-maxima padding (often by 10x or more) and
speeds up the looped marginal contractions; ``ll_dependencies`` carries the order to them. VMP/MMP
vmap the one-step contraction over the window, so there it is one matrix-matrix product per group.
Transition messages are the merged axis-aligned ones (``transitions.MergedTransitions``).

Plans (clusters, padded shapes, block offsets, BCOO shape and nse) are decided once in ``prepare`` from
the model's shapes; only the BCOO nse depends on values (max over the batch). The ops are frozen
dataclasses of static ints/tuples; the arrays live in ``params``:

- dense axis-aligned: ``params["groups"][g]``: (b, M_g, max m, N_1, ..., N_k)
- dense block:        ``params["groups"][g]``: (b, sum p_i, sum m_i)
- BCOO (either):      ``params["groups"][g]``: {"data": (b, nse), "indices": (b, nse, 2)}
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Sequence, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from ...model.generative_model import ModelStructure
from ..merging import axis_aligned as aa
from ..merging import block_diagonal as bd
from ..merging.sparse import BCOOPlan, bcoo_from_blocks, bcoo_matvec
from ..numerics import log_stable_np
from ..reference import accumulate_marginals, marginal_contributions
from ..sizes import check_hybrid_dense, hybrid_elements, hybrid_plan, size_sorted_axes

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
class _LoopedMarginals(Generic[Plan]):
    """The hybrid half that stays pymdp's: looped marginalisation of the per-modality ll.

    structure:   the model structure
    groups:      modality indices of each merged group (one group unless clustered)
    plans:       one merge plan per group
    axis_orders: each modality's lagging axes in size order (``sizes.size_sorted_axes``)
    bcoo:        one BCOOPlan per group when stored sparse, else ()

    Subclasses set ``block`` (block-diagonal, else axis-aligned merging), ``clustered`` and ``sparse``, and
    say how one group is merged (``_merge_dense``, ``_merge_bcoo``) and contracted (``_contract``); the
    planning (``sizes.hybrid_plan``), the size-sorted log-tensors and the per-group loops below are shared.

    ``ll[m]``'s axes follow ``self.ll_dependencies[m]``, a permutation of ``A_dependencies[m]``
    (contracting a tensor is symmetric in its axes; each factor still receives its modalities'
    contributions in modality order, so the per-factor sums are pymdp's).
    """

    structure: ModelStructure
    groups: Clusters
    plans: tuple[Plan, ...]
    axis_orders: tuple[tuple[int, ...], ...]
    bcoo: tuple[BCOOPlan, ...] = ()

    sparse: ClassVar[bool] = False
    clustered: ClassVar[bool] = False
    block: ClassVar[bool] = False
    padded: ClassVar[bool] = False  # messages on the list of posteriors (no ``marginals_padded``)
    folds_prior: ClassVar[bool] = False  # no ``fold_prior``: the driver adds FPI's log prior each iteration

    @property
    def ll_dependencies(self) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(d[j] for j in order) for d, order in zip(self.structure.A_dependencies, self.axis_orders))

    def marginals(self, params: dict, ll: Sequence[Array], qs: Sequence[Array]) -> list[Array]:
        """qs[f]: (n_f,) -> per factor (n_f,): sum over modalities of E_{q without f}[ll_m]."""
        deps = self.ll_dependencies
        contributions = [marginal_contributions(ll[m], deps[m], qs) for m in range(len(deps))]
        return accumulate_marginals(contributions, deps, self.structure.num_states)

    def joint(self, params: dict, ll: Sequence[Array]) -> Array:
        """Single-factor models: the summed log-likelihood (n_0,)."""
        return sum(ll[1:], ll[0])

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
    def prepare(cls, structure: ModelStructure, A: Sequence[np.ndarray], dtype: Any) -> tuple["_LoopedMarginals", dict]:
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
        return cls(structure, groups, plans, orders, tuple(bcoo_plans)), {"groups": arrays}

    def log_likelihoods(self, params: dict, obs: Sequence[Array]) -> list[Array]:
        """obs[i]: (m_i,) -> ll[i]: its lagging axes in ``ll_dependencies[i]`` order, one contraction per group."""
        ll: list[Any] = [None] * len(obs)
        for k, (g, plan) in enumerate(zip(self.groups, self.plans)):
            bcoo = self.bcoo[k] if self.bcoo else None
            for i, x in zip(g, self._contract(plan, bcoo, params["groups"][k], [obs[i] for i in g])):
                ll[i] = x
        return ll

    @staticmethod
    def _merge_dense(plan: Plan, log_A: Sequence[np.ndarray]) -> np.ndarray:
        """One group's log-tensors (b, m_i, lagging...) merged into its dense array."""
        raise NotImplementedError

    @staticmethod
    def _merge_bcoo(plan: Plan, log_A: Sequence[np.ndarray]) -> tuple[BCOOPlan, dict]:
        """One group's log-tensors (b, m_i, lagging...) as a BCOO matrix: (its plan, its arrays)."""
        raise NotImplementedError

    @staticmethod
    def _contract(plan: Plan, bcoo: BCOOPlan | None, merged: Any, obs: Sequence[Array]) -> list[Array]:
        """One group's observations (m_i,) -> its modalities' ll, through the merged array (BCOO when ``bcoo``)."""
        raise NotImplementedError


# ---- axis-aligned ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class AxisAlignedHybrid(_LoopedMarginals[aa.AxisAlignedPlan]):
    """Axis-aligned merged log-likelihood (one contraction per group) + looped marginals."""

    @staticmethod
    def _merge_dense(plan: aa.AxisAlignedPlan, log_A: Sequence[np.ndarray]) -> np.ndarray:
        return aa.merge_arrays(plan, log_A)

    @staticmethod
    def _merge_bcoo(plan: aa.AxisAlignedPlan, log_A: Sequence[np.ndarray]) -> tuple[BCOOPlan, dict]:
        return _axis_aligned_bcoo(plan, log_A)

    @staticmethod
    def _contract(plan: aa.AxisAlignedPlan, bcoo: BCOOPlan | None, merged: Any, obs: Sequence[Array]) -> list[Array]:
        obs_padded = aa.merge_vectors(plan, obs)  # (M_g, max m)
        if bcoo is not None:
            flat = bcoo_matvec(bcoo, merged, obs_padded.reshape(-1))
            out = flat.reshape((plan.num_items,) + plan.padded_lagging)
        else:
            out = aa.merged_contract(merged, obs_padded)
        return aa.deconstruct(plan, out)


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
class BlockDiagonalHybrid(_LoopedMarginals[bd.BlockDiagonalPlan]):
    """Block-diagonal merged log-likelihood (one matvec per group) + looped marginals."""

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
    def _contract(plan: bd.BlockDiagonalPlan, bcoo: BCOOPlan | None, merged: Any, obs: Sequence[Array]) -> list[Array]:
        o = bd.concat_vectors(obs)
        flat = bcoo_matvec(bcoo, merged, o) if bcoo is not None else merged @ o
        return bd.split_flat(plan, flat)


# ---- the six registered variants -------------------------------------------------------------------
@dataclass(frozen=True)
class HybridLikelihood(AxisAlignedHybrid):
    pass


@dataclass(frozen=True)
class SparseHybridLikelihood(AxisAlignedHybrid):
    sparse: ClassVar[bool] = True


@dataclass(frozen=True)
class ClusteredHybridLikelihood(AxisAlignedHybrid):
    clustered: ClassVar[bool] = True


@dataclass(frozen=True)
class HybridBlockLikelihood(BlockDiagonalHybrid):
    pass


@dataclass(frozen=True)
class SparseHybridBlockLikelihood(BlockDiagonalHybrid):
    sparse: ClassVar[bool] = True


@dataclass(frozen=True)
class ClusteredHybridBlockLikelihood(BlockDiagonalHybrid):
    clustered: ClassVar[bool] = True

