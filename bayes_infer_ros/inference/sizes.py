"""Build-time plans from a model's structure, and the sizes of the arrays each layout stores.

Every variant plans its layout here (which modalities merge together, the padded shapes) and checks its
memory limits here; the same functions count the stored elements without allocating anything, so a
layout too large to build is counted, not refused. The registry resolves a variant name to its ops
class, whose ``planned_elements`` calls the count of its layout below.

"Stored elements" are the values a variant keeps for ONE model: dense merged arrays with their padding;
BCOO arrays by ``nse`` (stored values; integer indices are not counted, as in the paper's parameter
counts). ``nonzeros`` is the (b, M) count of non-zeros of each model's ``log A`` per modality (the BCOO
``nse`` is the max over the batch); without values every real entry counts as non-zero.
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Optional, Sequence

import numpy as np

from ..model.generative_model import ModelStructure
from .errors import VariantUnsupported
from .merging import axis_aligned as aa
from .merging import block_diagonal as bd
from .merging.clustering import agglomerative_clusters, rank_clusters
from .numerics import log_stable_np

Clusters = tuple[tuple[int, ...], ...]

# A dense merged hybrid array beyond this many elements (8 GiB in float32) is refused at build time.
MAX_DENSE_ELEMENTS = 2 ** 31
# Padding every lagging axis to one width explodes as width ** rank (the paper's "explosion in memory
# requirements"). Beyond this many elements of an end-to-end merged tensor (128 MiB in float32; the
# per-call log-likelihood of the sparse variant is dense and of the same order) the variant refuses.
MAX_MERGED_ELEMENTS = 2 ** 25
# fused_dense's G holds (N^2 + N) x O values; past this (16 MiB in float32) fused_dense refuses the model
# and fused_pairwise (no N^2 storage) is the fused choice.
MAX_G_ELEMENTS = 2 ** 22

# Index dimensions of each BCOO layout (for the memory an index array takes next to its values).
HYBRID_BCOO_INDEX_DIMS = 2
END_TO_END_BCOO_INDEX_DIMS = 3


# ---- the unmerged model ---------------------------------------------------------------------------
def lagging_shapes(structure: ModelStructure) -> tuple[tuple[int, ...], ...]:
    """Per modality, the sizes of its dependencies (A's lagging axes in pymdp's order)."""
    return tuple(tuple(structure.num_states[f] for f in deps) for deps in structure.A_dependencies)


def modality_sizes(structure: ModelStructure) -> tuple[int, ...]:
    """Per modality, the elements of A_i: m_i * prod n_deps."""
    return tuple(m * math.prod(s) for m, s in zip(structure.num_obs, lagging_shapes(structure)))


def unmerged_elements(structure: ModelStructure) -> int:
    """The A tensors' elements (= ``baseline`` and ``fused_numba``, which keep log A unmerged)."""
    return int(sum(modality_sizes(structure)))


def nonzeros_per_model(structure: ModelStructure, A: Optional[Sequence[np.ndarray]], dtype: Any) -> np.ndarray:
    """(b, M) non-zeros of log A per model and modality, as stored in ``dtype`` (all real entries when A is None).

    A[i]: (m_i, n_deps...) or with a leading batch axis (b, m_i, n_deps...)."""
    if A is None:
        return np.asarray([modality_sizes(structure)], dtype=np.int64)
    A = [np.asarray(a) for a in A]
    A_b = A if A[0].ndim == len(structure.A_dependencies[0]) + 2 else [a[None] for a in A]
    cols = [np.count_nonzero(log_stable_np(a).astype(np.dtype(dtype)).reshape(a.shape[0], -1), axis=1) for a in A_b]
    return np.stack(cols, axis=1).astype(np.int64)


def bcoo_nse(nonzeros: np.ndarray, members: Sequence[int]) -> int:
    """nse of one BCOO holding ``members``: the max over the batch of their non-zeros (at least 1)."""
    return max(1, int(nonzeros[:, list(members)].sum(axis=1).max()))


# ---- hybrid plans (axis-aligned and block-diagonal) ------------------------------------------------
def size_sorted_axes(structure: ModelStructure) -> tuple[tuple[int, ...], ...]:
    """Per modality, its lagging axes ordered by decreasing size (stable; ties keep pymdp's order).

    Beyond the paper, exact: the order is a relabelling of each A-tensor's axes, carried through the
    marginalisation by the marginal groups' dependency lists (no transpose at run time). Padding to per-axis
    maxima wastes far less when large axes line up with large axes (measured on an F=10, M=25 model, hybrid:
    133M -> 10M stored elements), and so do the marginal groups (``modality_groups``). Used by all six hybrid
    variants and the fused family's higher-order term.
    """
    ns = structure.num_states
    return tuple(tuple(sorted(range(len(d)), key=lambda j: (-ns[d[j]], j))) for d in structure.A_dependencies)


#: Modalities of one rank share a marginal group while the group's zero-padded log-likelihoods hold at most
#: GROUP_WASTE times their real elements, or at most GROUP_SLACK_ELEMENTS more (tiny tensors cost nothing to pad).
GROUP_WASTE = 2
GROUP_SLACK_ELEMENTS = 4096


@lru_cache(maxsize=256)
def modality_groups(structure: ModelStructure, members: Optional[tuple[int, ...]] = None
                    ) -> tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]:
    """Groups of same-rank modalities whose likelihood messages run as one batched contraction: per group, its
    modalities (ascending) and the padded shape (N_1, ..., N_k) of their stacked log-likelihoods (per-axis maxima of
    the size-sorted lagging shapes, ``size_sorted_axes``). ``members``: only these modalities (default: all).

    Each rank's modalities are visited largest shape first (lexicographic on the size-sorted shape) and join the
    current group while its padded elements stay within ``GROUP_WASTE`` times its real ones (or
    ``GROUP_SLACK_ELEMENTS`` above them); otherwise they start the next group. Groups are ordered by rank, then by
    their first member. Shapes only, never values: two models of one structure share the plan.
    """
    orders = size_sorted_axes(structure)
    lag = [tuple(s[j] for j in o) for s, o in zip(lagging_shapes(structure), orders)]
    chosen = tuple(range(structure.num_modalities)) if members is None else tuple(members)
    by_rank: dict[int, list[int]] = {}
    for i in chosen:
        by_rank.setdefault(len(lag[i]), []).append(i)
    out = []
    for k in sorted(by_rank):
        current: list[int] = []
        for i in sorted(by_rank[k], key=lambda i: (tuple(-n for n in lag[i]), i)):
            cand = current + [i]
            padded = len(cand) * math.prod(max(lag[j][a] for j in cand) for a in range(k))
            real = sum(math.prod(lag[j]) for j in cand)
            if current and padded > max(GROUP_WASTE * real, real + GROUP_SLACK_ELEMENTS):
                out.append(tuple(sorted(current)))
                current = [i]
            else:
                current = cand
        out.append(tuple(sorted(current)))
    out.sort(key=lambda g: (len(lag[g[0]]), g[0]))
    return tuple((g, tuple(max(lag[j][a] for j in g) for a in range(len(lag[g[0]])))) for g in out)


def axis_groups(structure: ModelStructure, clustered: bool) -> Clusters:
    """All modalities in one group, or one group per A-rank (rank clustering)."""
    return rank_clusters(lagging_shapes(structure)) if clustered else (tuple(range(structure.num_modalities)),)


@lru_cache(maxsize=256)
def block_groups(structure: ModelStructure, clustered: bool) -> Clusters:
    """All modalities in one block matrix, or the agglomerative clusters at the elbow."""
    if not clustered:
        return (tuple(range(structure.num_modalities)),)
    rows = [int(np.prod(s, dtype=np.int64)) for s in lagging_shapes(structure)]
    return agglomerative_clusters(rows, structure.num_obs).clusters


@lru_cache(maxsize=256)
def hybrid_plan(structure: ModelStructure, block: bool, clustered: bool) -> tuple[Clusters, tuple[Any, ...]]:
    """(modality groups, one merge plan per group) of a hybrid layout, lagging axes size-sorted (frozen
    plans, cached per structure)."""
    orders = size_sorted_axes(structure)
    lag = tuple(tuple(s[j] for j in o) for s, o in zip(lagging_shapes(structure), orders))
    groups = block_groups(structure, clustered) if block else axis_groups(structure, clustered)
    plan_group = bd.block_diagonal_plan if block else aa.axis_aligned_plan
    plans = tuple(plan_group([structure.num_obs[i] for i in g], [lag[i] for i in g]) for g in groups)
    return groups, plans


def check_hybrid_dense(name: str, plans: Sequence[Any]) -> None:
    """Refuse a dense hybrid layout with a merged array over ``MAX_DENSE_ELEMENTS``."""
    largest = max((p.merged_size for p in plans), default=0)
    if largest > MAX_DENSE_ELEMENTS:
        raise VariantUnsupported(f"{name}: a merged dense array would hold {largest:,} elements "
                                 f"(> {MAX_DENSE_ELEMENTS:,}); use a sparse or clustered variant")


def hybrid_elements(structure: ModelStructure, block: bool, clustered: bool, sparse: bool,
                    nonzeros: np.ndarray) -> int:
    """Stored elements of a hybrid layout: dense merged sizes, or one BCOO's nse per group."""
    groups, plans = hybrid_plan(structure, block, clustered)
    if sparse:
        return int(sum(bcoo_nse(nonzeros, g) for g in groups))
    return int(sum(p.merged_size for p in plans))


# ---- end-to-end plans ------------------------------------------------------------------------------
def end_to_end_groups(structure: ModelStructure, clustered: bool) -> Clusters:
    """All modalities in one merged tensor, or one per A-rank (the paper's rank clustering)."""
    return axis_groups(structure, clustered)


def end_to_end_dense_elements(structure: ModelStructure, members: Sequence[int]) -> int:
    """Elements of one end-to-end merged tensor: M_c x max m x W ** k (W: widest dependency, k: longest list)."""
    deps = structure.A_dependencies
    width = max(structure.num_states[f] for i in members for f in deps[i])
    rank = max(len(deps[i]) for i in members)
    return len(members) * max(structure.num_obs[i] for i in members) * width ** rank


def check_end_to_end(name: str, structure: ModelStructure, members: Sequence[int]) -> None:
    """Refuse an end-to-end merged tensor over ``MAX_MERGED_ELEMENTS``."""
    size = end_to_end_dense_elements(structure, members)
    if size > MAX_MERGED_ELEMENTS:
        raise VariantUnsupported(
            f"{name}: the merged log A would hold {size:,} elements ({len(members)} modalities), over the budget "
            f"of {MAX_MERGED_ELEMENTS:,}; use clustered_end_to_end or a hybrid variant")


def end_to_end_elements(structure: ModelStructure, clustered: bool, sparse: bool, nonzeros: np.ndarray) -> int:
    """Stored elements of an end-to-end layout: dense tensors with padding, or the BCOO nse per tensor."""
    groups = end_to_end_groups(structure, clustered)
    if sparse:
        return int(sum(bcoo_nse(nonzeros, g) for g in groups))
    return int(sum(end_to_end_dense_elements(structure, g) for g in groups))


# ---- fused plans -----------------------------------------------------------------------------------
def fused_partition(structure: ModelStructure) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(unary, pair, higher): modalities with one, two, and three or more dependencies."""
    deps = structure.A_dependencies
    return (tuple(i for i, d in enumerate(deps) if len(d) == 1), tuple(i for i, d in enumerate(deps) if len(d) == 2),
            tuple(i for i, d in enumerate(deps) if len(d) >= 3))


def fused_g_elements(structure: ModelStructure) -> int:
    """fused_dense's G: (N^2 + N) x O with N = F * n_max, O = sum m_i (N x O without two-factor modalities)."""
    _, pair, _ = fused_partition(structure)
    N = structure.num_factors * max(structure.num_states)
    return ((N * N + N) if pair else N) * int(sum(structure.num_obs))


def check_fused_dense(structure: ModelStructure) -> None:
    """Refuse fused_dense when G exceeds ``MAX_G_ELEMENTS``."""
    size = fused_g_elements(structure)
    if size > MAX_G_ELEMENTS:
        N = structure.num_factors * max(structure.num_states)
        raise VariantUnsupported(
            f"fused_dense: G would hold {size:,} elements ((N^2 + N) x O with N = F * n_max = {N}, "
            f"O = {int(sum(structure.num_obs))}), over the budget of {MAX_G_ELEMENTS:,}; use fused_pairwise")


def grouped_elements(structure: ModelStructure, members: Sequence[int]) -> int:
    """Elements of ``members``' log A stacked per marginal group (``modality_groups``): M_g x max m x N_1 ... N_k."""
    return int(sum(len(g) * max(structure.num_obs[i] for i in g) * math.prod(shape)
                   for g, shape in modality_groups(structure, tuple(members))))


def check_grouped_dense(name: str, structure: ModelStructure, members: Sequence[int]) -> None:
    """Refuse stacked log A of one marginal group over ``MAX_DENSE_ELEMENTS``."""
    for g, shape in modality_groups(structure, tuple(members)):
        size = len(g) * max(structure.num_obs[i] for i in g) * math.prod(shape)
        if size > MAX_DENSE_ELEMENTS:
            raise VariantUnsupported(f"{name}: the stacked log A of {len(g)} modalities would hold {size:,} elements "
                                     f"(> {MAX_DENSE_ELEMENTS:,})")


def fused_elements(structure: ModelStructure, dense: bool) -> int:
    """Stored elements of fused_dense (G) or fused_pairwise (stacked one- and two-factor log A), plus the
    higher-order term (its modalities' log A stacked per marginal group)."""
    unary, pair, higher = fused_partition(structure)
    n = max(structure.num_states)
    if dense:
        total = fused_g_elements(structure)
    else:
        total = 0
        if unary:
            total += len(unary) * max(structure.num_obs[i] for i in unary) * n
        if pair:
            total += len(pair) * max(structure.num_obs[i] for i in pair) * n * n
    if higher:
        total += grouped_elements(structure, higher)
    return int(total)
