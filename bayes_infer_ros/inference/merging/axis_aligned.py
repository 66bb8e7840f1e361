"""Axis-aligned padding and merging (paper Sec. III-C-1 and Appendix A).

Build time (numpy): the per-modality tensors ``X_i`` of shape ``(b, m_i, n_{i,1}, ..., n_{i,k_i})`` are
zero-padded to one common shape and stacked on a new modality axis:
``(b, M, max_i m_i, N_1, ..., N_k)`` where ``k = max_i k_i`` and ``N_j = max_i n_{i,j}`` over the
modalities that have a j-th lagging axis (per-axis maxima: the hybrid variants), or
``N_j = n_max`` for every j (``global_max=True``: the end-to-end variants). A modality with fewer than
``k`` lagging axes sits at index 0 of the missing trailing axes (pymdp ``deconstruct_lls`` reads it there).

Run time (jax, one model, one time step): observations are stacked the same way to ``(M, max m)``,
``merged_contract`` does the whole loop of ``sum_o obs_i[o] X_i[o, ...]`` as ONE batched contraction
(a dot_general with the modality axis as batch axis), and ``deconstruct`` crops every slab back.

The plan (``AxisAlignedPlan``) holds static ints only, hashable by value.
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
class AxisAlignedPlan:
    """Static layout of one axis-aligned merge.

    lead_sizes:     (M,)  size of each item's leading (contracted) axis, m_i
    lagging_shapes: M tuples, each item's lagging shape (n_{i,1}, ..., n_{i,k_i})
    padded_lead:    max_i m_i
    padded_lagging: (N_1, ..., N_k), the common lagging shape
    """

    lead_sizes: tuple[int, ...]
    lagging_shapes: tuple[Shape, ...]
    padded_lead: int
    padded_lagging: Shape

    @property
    def num_items(self) -> int:
        return len(self.lead_sizes)

    @property
    def merged_shape(self) -> Shape:
        """Shape of the merged tensor for one model: (M, max m, N_1, ..., N_k)."""
        return (self.num_items, self.padded_lead) + self.padded_lagging

    @property
    def merged_size(self) -> int:
        return int(np.prod(self.merged_shape, dtype=np.int64))

    @property
    def unmerged_size(self) -> int:
        return int(sum(m * int(np.prod(s, dtype=np.int64)) for m, s in zip(self.lead_sizes, self.lagging_shapes)))


def axis_aligned_plan(lead_sizes: Sequence[int], lagging_shapes: Sequence[Sequence[int]], global_max: bool = False) -> AxisAlignedPlan:
    """Plan from shapes only. ``global_max``: pad every lagging axis to the largest lagging size overall."""
    lead = tuple(int(m) for m in lead_sizes)
    lag = tuple(tuple(int(n) for n in s) for s in lagging_shapes)
    if not lead:
        raise ValueError("axis_aligned_plan: nothing to merge")
    if len(lag) != len(lead):
        raise ValueError("axis_aligned_plan: lead_sizes and lagging_shapes differ in length")
    k = max(len(s) for s in lag)
    if global_max:
        n_max = max((n for s in lag for n in s), default=1)
        padded = (n_max,) * k
    else:
        padded = tuple(max(s[j] for s in lag if len(s) > j) for j in range(k))
    return AxisAlignedPlan(lead, lag, max(lead), padded)


def _item_index(plan: AxisAlignedPlan, i: int, with_lead: bool) -> tuple:
    """Index of item i's real entries inside its padded slab (trailing missing axes at 0)."""
    lag = plan.lagging_shapes[i]
    idx = tuple(slice(0, n) for n in lag) + (0,) * (len(plan.padded_lagging) - len(lag))
    return ((slice(0, plan.lead_sizes[i]),) + idx) if with_lead else idx


def merge_arrays(plan: AxisAlignedPlan, arrays: Sequence[np.ndarray], fill: float = 0.0) -> np.ndarray:
    """Build time. arrays[i]: (b, m_i, *lagging_i) -> (b, M, max m, *padded_lagging), padded with ``fill``."""
    b = int(np.shape(arrays[0])[0])
    dtype = np.result_type(*[np.asarray(a).dtype for a in arrays])
    out = np.full((b,) + plan.merged_shape, fill, dtype=dtype)
    for i, a in enumerate(arrays):
        a = np.asarray(a)
        expected = (b, plan.lead_sizes[i]) + plan.lagging_shapes[i]
        if a.shape != expected:
            raise ValueError(f"merge_arrays: item {i} has shape {a.shape}, expected {expected}")
        out[(slice(None), i) + _item_index(plan, i, with_lead=True)] = a
    return out


def split_arrays(plan: AxisAlignedPlan, merged: np.ndarray) -> list[np.ndarray]:
    """Inverse of ``merge_arrays`` (build time / tests): (b, M, max m, *padded) -> arrays[i] (b, m_i, *lagging_i)."""
    return [merged[(slice(None), i) + _item_index(plan, i, with_lead=True)] for i in range(plan.num_items)]


def stack_vectors(vectors: Sequence[Array], width: int) -> Array:
    """Run time: vectors[i] (..., n_i) -> (..., len(vectors), width), zero-padded, as one concatenation and one
    gather with a static index (not a pad per vector: the program stays the same size whatever their number)."""
    sizes = [int(v.shape[-1]) for v in vectors]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    index = np.full((len(vectors), width), offsets[-1], dtype=np.int32)  # padding reads the appended zero
    for r, n in enumerate(sizes):
        index[r, :n] = np.arange(offsets[r], offsets[r] + n)
    lead = vectors[0].shape[:-1]
    flat = jnp.concatenate(list(vectors) + [jnp.zeros(lead + (1,), dtype=vectors[0].dtype)], axis=-1)
    return jnp.take(flat, jnp.asarray(index), axis=-1)


def merge_vectors(plan: AxisAlignedPlan, vectors: Sequence[Array]) -> Array:
    """Run time, one model: vectors[i] (m_i,) -> (M, max m), zero-padded."""
    return stack_vectors(vectors, plan.padded_lead)


def merged_contract(merged: Array, vectors_padded: Array) -> Array:
    """(M, max m, *padded) x (M, max m) -> (M, *padded): sum over the lead axis, batched over items.

    One dot_general: the loop over modalities becomes its batch dimension.
    """
    lag = merged.shape[2:]
    flat = merged.reshape(merged.shape[:2] + (-1,))
    out = jnp.einsum("mop,mo->mp", flat, vectors_padded)
    return out.reshape(merged.shape[:1] + lag)


def flat_positions(plan: AxisAlignedPlan, i: int) -> np.ndarray:
    """Build time: where item i's entries (its lagging shape) sit in the flattened ``(M, *padded_lagging)``
    output of ``merged_contract`` (int64)."""
    lag = plan.lagging_shapes[i]
    grid = np.indices(lag, dtype=np.int64).reshape(len(lag), -1)
    grid = np.concatenate([grid, np.zeros((len(plan.padded_lagging) - len(lag), grid.shape[1]), dtype=np.int64)])
    size = int(np.prod(plan.padded_lagging, dtype=np.int64))
    local = np.ravel_multi_index(tuple(grid), plan.padded_lagging) if plan.padded_lagging else np.zeros(1, np.int64)
    return (i * size + local).reshape(lag)


def deconstruct(plan: AxisAlignedPlan, merged_out: Array) -> list[Array]:
    """Run time, one model: (M, *padded_lagging) -> list of (lagging_i) (pymdp ``deconstruct_lls``)."""
    return [merged_out[(i,) + _item_index(plan, i, with_lead=False)] for i in range(plan.num_items)]
