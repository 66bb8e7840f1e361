"""Block-diagonal merging (paper Sec. III-C-2 and Appendix A).

Build time (numpy): each ``X_i`` of shape ``(b, m_i, n_{i,1}, ..., n_{i,k_i})`` has its lagging axes
flattened into ``p_i = prod_j n_{i,j}`` and is laid out transposed, ``(p_i, m_i)``, as the i-th
diagonal block of one ``(sum p_i, sum m_i)`` matrix (zeros elsewhere).

Run time (jax, one model, one time step): the loop of ``sum_o obs_i[o] X_i[o, ...]`` is ONE
matrix-vector product with the concatenated observations; the ``(sum p_i,)`` result is split at the
static row offsets and reshaped to the lagging shapes.

The plan (``BlockDiagonalPlan``) holds static ints only, hashable by value.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array
Shape = tuple[int, ...]


@dataclass(frozen=True)
class BlockDiagonalPlan:
    """Static layout of one block-diagonal merge.

    col_sizes:      (M,) m_i, the columns of each block (contracted with the observation)
    lagging_shapes: M tuples, the lagging shape of each block; its rows are their product p_i
    """

    col_sizes: tuple[int, ...]
    lagging_shapes: tuple[Shape, ...]

    @property
    def num_items(self) -> int:
        return len(self.col_sizes)

    @property
    def row_sizes(self) -> tuple[int, ...]:
        return tuple(int(np.prod(s, dtype=np.int64)) for s in self.lagging_shapes)

    @property
    def row_offsets(self) -> tuple[int, ...]:
        return tuple(int(x) for x in np.concatenate([[0], np.cumsum(self.row_sizes, dtype=np.int64)]))

    @property
    def col_offsets(self) -> tuple[int, ...]:
        return tuple(int(x) for x in np.concatenate([[0], np.cumsum(self.col_sizes, dtype=np.int64)]))

    @property
    def merged_shape(self) -> Shape:
        return (self.row_offsets[-1], self.col_offsets[-1])

    @property
    def merged_size(self) -> int:
        r, c = self.merged_shape
        return int(r) * int(c)

    @property
    def unmerged_size(self) -> int:
        return int(sum(p * m for p, m in zip(self.row_sizes, self.col_sizes)))


def block_diagonal_plan(col_sizes: Sequence[int], lagging_shapes: Sequence[Sequence[int]]) -> BlockDiagonalPlan:
    cols = tuple(int(m) for m in col_sizes)
    lag = tuple(tuple(int(n) for n in s) for s in lagging_shapes)
    if not cols or len(cols) != len(lag):
        raise ValueError("block_diagonal_plan: need one lagging shape per block, at least one block")
    return BlockDiagonalPlan(cols, lag)


def merge_arrays(plan: BlockDiagonalPlan, arrays: Sequence[np.ndarray], fill: float = 0.0) -> np.ndarray:
    """Build time. arrays[i]: (b, m_i, *lagging_i) -> (b, sum p_i, sum m_i) block-diagonal (``fill`` elsewhere)."""
    b = int(np.shape(arrays[0])[0])
    dtype = np.result_type(*[np.asarray(a).dtype for a in arrays])
    out = np.full((b,) + plan.merged_shape, fill, dtype=dtype)
    r, c = plan.row_offsets, plan.col_offsets
    for i, a in enumerate(arrays):
        a = np.asarray(a)
        expected = (b, plan.col_sizes[i]) + plan.lagging_shapes[i]
        if a.shape != expected:
            raise ValueError(f"merge_arrays: block {i} has shape {a.shape}, expected {expected}")
        out[:, r[i]:r[i + 1], c[i]:c[i + 1]] = a.reshape(b, plan.col_sizes[i], -1).transpose(0, 2, 1)
    return out


def split_arrays(plan: BlockDiagonalPlan, merged: np.ndarray) -> list[np.ndarray]:
    """Inverse of ``merge_arrays`` (tests): (b, sum p, sum m) -> arrays[i] (b, m_i, *lagging_i)."""
    r, c = plan.row_offsets, plan.col_offsets
    b = merged.shape[0]
    return [
        merged[:, r[i]:r[i + 1], c[i]:c[i + 1]].transpose(0, 2, 1).reshape((b, plan.col_sizes[i]) + plan.lagging_shapes[i])
        for i in range(plan.num_items)
    ]


def concat_vectors(vectors: Sequence[Array]) -> Array:
    """Run time: vectors[i] (m_i,) -> (sum m_i,)."""
    return vectors[0] if len(vectors) == 1 else jnp.concatenate(list(vectors))


def flat_positions(plan: BlockDiagonalPlan, i: int) -> np.ndarray:
    """Build time: where block i's entries (its lagging shape) sit in the ``(sum p_i,)`` product (int64)."""
    r = plan.row_offsets
    return np.arange(r[i], r[i + 1], dtype=np.int64).reshape(plan.lagging_shapes[i])


def split_flat(plan: BlockDiagonalPlan, flat: Array) -> list[Array]:
    """Run time: (sum p_i,) -> list of (lagging_i) (pymdp ``deconstruct_log_likelihoods_block_diag``)."""
    r = plan.row_offsets
    return [flat[r[i]:r[i + 1]].reshape(plan.lagging_shapes[i]) for i in range(plan.num_items)]
