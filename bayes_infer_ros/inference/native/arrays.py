"""The model as the native kernels read it: :class:`NativeModel`, built once from a model's arrays and shared by
both native backends (``fused_numba``'s :class:`~.engine.NativeEngine` on the host, ``fused_cuda``'s
:class:`~.cuda_engine.CudaEngine`, which copies the same arrays to the device). Pure numpy: no numba needed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np

from ...model.generative_model import ModelStructure
from ..numerics import MINVAL, log_stable_np
from .schema import ModelIndex, model_fields


@dataclass(frozen=True)
class NativePlan:
    """Static layout of one model structure (hashable).

    a_offsets: (M+1,) offsets of each modality's flattened (m_i, P_i) log A in one buffer
    ll_offsets: (M+1,) offsets of each modality's flattened (P_i,) log-likelihood
    deps, dims: (M, K) each modality's factors and their sizes (-1 / 1 past its k_i)
    """

    num_states: tuple[int, ...]
    num_obs: tuple[int, ...]
    n_max: int
    a_offsets: tuple[int, ...]
    ll_offsets: tuple[int, ...]
    deps: tuple[tuple[int, ...], ...]
    dims: tuple[tuple[int, ...], ...]
    has_B: bool


def pack_tick_model(index_arrays: ModelIndex) -> np.ndarray:
    """``ints`` for the step kernels (``schema``'s Arguments): a header (offset, rows, cols) per index array, in
    ``ModelIndex``'s order (its slot constants), then the arrays (int64, row-major)."""
    header, parts, offset = [], [], 3 * len(index_arrays)
    for a in index_arrays:
        a = np.asarray(a, np.int64)
        header += [offset, a.shape[0], a.shape[1] if a.ndim == 2 else 1]
        parts.append(a.ravel())
        offset += a.size
    return np.concatenate([np.asarray(header, np.int64)] + parts)


def message_offsets(dims: np.ndarray, ks: np.ndarray) -> np.ndarray:
    """msg_off (M + 1,) int64: where modality m's messages to its dependencies start in one agent's row of messages,
    sum_j dims[m, j] of them when it has two or more dependencies (none otherwise)."""
    sizes = [int(dims[m, :ks[m]].sum()) if ks[m] >= 2 else 0 for m in range(len(ks))]
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


@dataclass(frozen=True, eq=False)
class NativeModel:
    """One model (or a batch of bA models of one structure) packed for the native kernels.

    Every name is the kernel argument of that name, documented in ``schema``: the index arrays of ``ModelIndex``;
    ``log_A``, ``B``, ``log_B``, ``has_B``; ``ints`` (the step kernels' index arrays in one);
    ``minval``; ``msg_off`` (where each modality's messages start, for fused_cuda's large-model kernel). ``plan``:
    the hashable layout. ``bind(schema)`` gives an entry point's leading (model) arguments.
    """

    a_off: np.ndarray
    ll_off: np.ndarray
    deps: np.ndarray
    dims: np.ndarray
    ks: np.ndarray
    ns: np.ndarray
    o_off: np.ndarray
    s_off: np.ndarray
    b_off: np.ndarray
    bdeps: np.ndarray
    bdims: np.ndarray
    bks: np.ndarray
    ncontrols: np.ndarray
    log_A: np.ndarray
    B: np.ndarray
    log_B: np.ndarray
    has_B: bool
    ints: np.ndarray
    minval: Any
    msg_off: np.ndarray
    plan: NativePlan
    _bound: dict = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, structure: ModelStructure, A_b: Sequence[np.ndarray], B_b: Optional[Sequence[np.ndarray]],
              dtype: Any) -> "NativeModel":
        """A[i] (bA, m_i, n_deps...), B[f] (bA, n_f, n_deps..., u_f) or None -> the packed model in ``dtype``."""
        dtype = np.dtype(dtype)
        ns = np.asarray(structure.num_states, np.int64)
        b = int(A_b[0].shape[0])
        deps = structure.A_dependencies
        K = max(len(d) for d in deps)
        sizes = [int(np.prod([structure.num_states[f] for f in d], dtype=np.int64)) for d in deps]
        a_sizes = [structure.num_obs[i] * sizes[i] for i in range(len(deps))]
        a_off = np.concatenate([[0], np.cumsum(a_sizes)]).astype(np.int64)
        ll_off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        # C order whatever the inputs' (a batch of broadcast A is not): the compiled entry points read it as C
        log_A = np.ascontiguousarray(np.concatenate(
            [log_stable_np(np.asarray(a, np.float64)).reshape(b, -1) for a in A_b], axis=1), dtype=dtype)
        dep_arr = np.full((len(deps), K), -1, np.int64)
        dims = np.ones((len(deps), K), np.int64)
        for m, d in enumerate(deps):
            dep_arr[m, : len(d)] = d
            dims[m, : len(d)] = [structure.num_states[f] for f in d]
        offsets = lambda sizes: np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)  # noqa: E731
        # B per factor, flattened as (u_f + 1, n_f, P_f): control u_f is pymdp's neutral transition (1 / n_f)
        bdeps_l = structure.B_dependencies
        KB = max(len(d) for d in bdeps_l)
        bdeps = np.zeros((len(ns), KB), np.int64)
        bdims = np.ones((len(ns), KB), np.int64)
        for f, d in enumerate(bdeps_l):
            bdeps[f, : len(d)] = d
            bdims[f, : len(d)] = [structure.num_states[x] for x in d]
        blocks = []
        for f in range(len(ns)):
            n_f, u_f = structure.num_states[f], structure.num_controls[f]
            P = int(np.prod([structure.num_states[x] for x in bdeps_l[f]], dtype=np.int64))
            blk = np.full((b, u_f + 1, n_f, P), 1.0 / n_f)
            if B_b is not None:
                bf = np.asarray(B_b[f], np.float64).reshape(b, n_f, P, u_f)
                blk[:, :u_f] = np.transpose(bf, (0, 3, 1, 2))
            blocks.append(blk.reshape(b, -1))
        B = np.concatenate(blocks, axis=1)
        index = ModelIndex(a_off=a_off, ll_off=ll_off, deps=dep_arr, dims=dims,
                     ks=np.asarray([len(d) for d in deps], np.int64), ns=ns,
                     o_off=offsets(structure.num_obs), s_off=offsets(structure.num_states),
                     b_off=offsets([x.shape[1] for x in blocks]), bdeps=bdeps, bdims=bdims,
                     bks=np.asarray([len(d) for d in bdeps_l], np.int64),
                     ncontrols=np.asarray(structure.num_controls, np.int64))
        B_c = np.ascontiguousarray(B, dtype=dtype)
        ints = pack_tick_model(index)
        plan = NativePlan(tuple(int(x) for x in ns), tuple(structure.num_obs), int(ns.max()),
                          tuple(int(x) for x in a_off), tuple(int(x) for x in ll_off),
                          tuple(map(tuple, dep_arr.tolist())), tuple(map(tuple, dims.tolist())), B_b is not None)
        return cls(**index._asdict(), log_A=log_A, B=B_c, log_B=np.ascontiguousarray(log_stable_np(B), dtype=dtype),
                   has_B=B_b is not None, ints=ints,
                   minval=dtype.type(MINVAL), msg_off=message_offsets(index.dims, index.ks), plan=plan)

    @property
    def ll_size(self) -> int:
        """L: the log-likelihood elements of one step (every modality's)."""
        return int(self.ll_off[-1])

    def bind(self, schema: type) -> tuple:
        """An entry point's leading arguments, the model's (``schema.model_fields``), in its order; made once."""
        if schema not in self._bound:
            self._bound[schema] = tuple(getattr(self, n) for n in model_fields(schema))
        return self._bound[schema]
