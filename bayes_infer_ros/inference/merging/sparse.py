"""BCOO storage of merged matrices (``jax.experimental.sparse``), built without the dense merge.

A merged likelihood is stored as a 2-D BCOO matrix ``(rows, cols)`` whose matrix-vector product with
the merged observation vector gives the merged log-likelihood:

- block-diagonal: the ``(sum p_i, sum m_i)`` matrix itself;
- axis-aligned: the ``(M, max m, N_1..N_k)`` tensor viewed as the ``(M * prod N, M * max m)`` matrix
  whose only non-zeros pair modality i's padded rows with modality i's padded observation slots; its
  product with the flattened ``(M, max m)`` observations is exactly the merged contraction, and its
  stored elements are exactly the non-zeros of the padded tensor.

``nse`` (stored elements) depends on the VALUES: zeros of the stored tensor (padding, and log A = 0
where A = 1) are dropped. For a batch of models of one structure, nse is the max over the batch;
shorter rows are filled the way ``BCOO.fromdense`` fills them (data 0, out-of-bounds indices, which
every BCOO op ignores). Entries are row-major sorted and unique.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import jax
import numpy as np
from jax.experimental import sparse as jsparse

Array = jax.Array


@dataclass(frozen=True)
class BCOOPlan:
    """Static part of a batched 2-D BCOO: its dense shape and the stored-element count."""

    shape: tuple[int, int]
    nse: int


def _index_dtype(shape: Sequence[int]):
    return np.int32 if max(shape) < np.iinfo(np.int32).max else np.int64


def bcoo_from_blocks(
    blocks: Sequence[np.ndarray],
    row_index: Sequence[np.ndarray],
    col_index: Sequence[np.ndarray],
    shape: tuple[int, int],
) -> tuple[BCOOPlan, dict]:
    """Build a batched 2-D BCOO from blocks without materialising the dense matrix.

    blocks[i]:    (b, c_i, r_i)  values; entry [.., o, p] goes to (row_index[i][p], col_index[i][o])
    row_index[i]: (r_i,) int, col_index[i]: (c_i,) int (global positions)
    Returns (plan, {"data": (b, nse), "indices": (b, nse, 2)}), numpy arrays.
    """
    b = int(np.shape(blocks[0])[0])
    idx_dtype = _index_dtype(shape)
    per_model_rows, per_model_cols, per_model_vals = [], [], []
    for k in range(b):
        rows, cols, vals = [], [], []
        for blk, ri, ci in zip(blocks, row_index, col_index):
            x = np.asarray(blk[k])
            o, p = np.nonzero(x)
            rows.append(np.asarray(ri, dtype=np.int64)[p])
            cols.append(np.asarray(ci, dtype=np.int64)[o])
            vals.append(x[o, p])
        rows, cols = np.concatenate(rows), np.concatenate(cols)
        vals = np.concatenate(vals)
        order = np.lexsort((cols, rows))
        per_model_rows.append(rows[order])
        per_model_cols.append(cols[order])
        per_model_vals.append(vals[order])
    nse = max(1, max(len(v) for v in per_model_vals))
    dtype = np.result_type(*[np.asarray(blk).dtype for blk in blocks])
    data = np.zeros((b, nse), dtype=dtype)
    indices = np.empty((b, nse, 2), dtype=idx_dtype)
    indices[..., 0] = shape[0]
    indices[..., 1] = shape[1]
    for k in range(b):
        n = len(per_model_vals[k])
        data[k, :n] = per_model_vals[k]
        indices[k, :n, 0] = per_model_rows[k]
        indices[k, :n, 1] = per_model_cols[k]
    return BCOOPlan((int(shape[0]), int(shape[1])), int(nse)), {"data": data, "indices": indices}


def bcoo_from_dense(dense: np.ndarray) -> tuple[BCOOPlan, dict]:
    """Batched dense (b, R, C) -> BCOO parts (tests and small models)."""
    dense = np.asarray(dense)
    b, R, C = dense.shape
    blocks = [dense.transpose(0, 2, 1)]
    return bcoo_from_blocks(blocks, [np.arange(R)], [np.arange(C)], (R, C))


def as_bcoo(plan: BCOOPlan, parts: dict) -> jsparse.BCOO:
    """One model's parts (data (nse,), indices (nse, 2)) -> a BCOO matrix of ``plan.shape``."""
    return jsparse.BCOO((parts["data"], parts["indices"]), shape=plan.shape, indices_sorted=True, unique_indices=True)


def bcoo_matvec(plan: BCOOPlan, parts: dict, vector: Array) -> Array:
    """(R, C) BCOO @ (C,) -> (R,) dense."""
    return as_bcoo(plan, parts) @ vector


def bcoo_todense(plan: BCOOPlan, parts: dict) -> Array:
    return as_bcoo(plan, parts).todense()
