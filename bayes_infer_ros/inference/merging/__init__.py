"""Merging primitives (paper Sec. III-C/D, Appendix A): build-time layouts with static, hashable plans.

- ``axis_aligned``: zero-padding to per-axis (or global) maxima, merge, deconstruct
- ``block_diagonal``: flattened lagging axes as blocks of one matrix, split/reshape back
- ``sparse``: BCOO storage of a merged matrix, nse fixed at build time
- ``clustering``: rank clustering (axis-aligned) and agglomerative clustering with an elbow rule (block)
"""
from .axis_aligned import AxisAlignedPlan, axis_aligned_plan
from .block_diagonal import BlockDiagonalPlan, block_diagonal_plan
from .clustering import AgglomerativeResult, agglomerative_clusters, elbow_index, rank_clusters
from .sparse import BCOOPlan, bcoo_from_blocks, bcoo_matvec

__all__ = [
    "AxisAlignedPlan", "axis_aligned_plan", "BlockDiagonalPlan", "block_diagonal_plan",
    "AgglomerativeResult", "agglomerative_clusters", "elbow_index", "rank_clusters",
    "BCOOPlan", "bcoo_from_blocks", "bcoo_matvec",
]
