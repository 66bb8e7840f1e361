"""``fused_cuda``'s FPI tick for models past one block's shared memory: the per-agent state in global memory, and
several thread blocks per agent (optional: needs numba's CUDA target; see docs/gpu.md for the choice).

The maths is ``cuda_kernels.fpi_tick_kernel``'s (fused_numba's, pymdp 1.0.4's term by term) with the same device
helpers, in phases separated by a barrier over the agent's blocks:

* phase 0: the log likelihood ``ll`` (L,) of every modality, strided over the agent's threads; the constant term
  ``c`` (S,) (log prior and the one-dependency modalities' log likelihood, recomputed from the observation) and the
  uniform posterior ``Q`` (S,);
* each iteration, two phases: every message of a modality with two or more dependencies, one per (modality,
  dependency j, level a) and thread (``msg``, float64: a k >= 3 sum is float64 as fused_numba's); then per factor
  (one thread each) ``x = c + its messages`` in modality order and ``Q = softmax(x)`` of its row;
* one factor: ``Q = softmax(c)`` (pymdp's one-pass update), per factor;
* the output: the beliefs and the next prior (``contract`` of B under the agent's action).

Per agent the sums run in the same order as ``fpi_tick_kernel``'s, so its results are that kernel's bits.
The arguments: ``schema.CudaTickGlobalArgs`` (``scratch`` (b, L + 3 S) of the model's dtype holds ll, c, x, Q;
``msg`` (b, msg_off[M]) float64 the messages, modality m's to its dependency j at level a at
``msg_off[m] + sum_{j' < j} dims[m, j'] + a``).

The kernel runs the phases [phase_lo, phase_hi). Built ``cooperative``, its barrier is a grid-wide one (CUDA
cooperative groups: every block of the launch is resident at once, at most ``max_cooperative_grid_blocks``), and
one launch runs every phase; otherwise its barrier is the block's, which is a barrier over the agent when it has
one block, and several blocks per agent run one launch per phase (the launch boundary is the barrier): numba's
CUDA simulator runs cooperative grids of one block only, so that is how the tests run several blocks per agent.
"""
from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from numba import cuda

from .cuda_kernels import agent_block, contract, index1, index2, log_likelihood_at, softmax_at, state_of, tick_out
from .schema import DEPS, DIMS, KS, LL_OFF, NS, S_OFF


def phases(num_iter: int, num_factors: int) -> int:
    """The kernel's phases for one tick: init, two per iteration, the one-factor softmax, the output."""
    return 2 * (num_iter if num_factors > 1 else 0) + 3


@cuda.jit(device=True, inline=True)
def _grid_barrier():
    cuda.cg.this_grid().sync()


@cuda.jit(device=True, inline=True)
def _block_barrier():
    cuda.syncthreads()


@functools.lru_cache(maxsize=None)
def fpi_tick_global_kernel(dtype_name: str, cooperative: bool) -> Any:
    """The kernel for float32 or float64, with a grid-wide barrier (``cooperative``) or the block's."""
    cast = np.dtype(dtype_name).type
    zero, one, zero64 = cast(0), cast(1), np.float64(0)
    barrier = _grid_barrier if cooperative else _block_barrier

    @cuda.jit
    def fpi_tick_global(ints, log_A, B, msg_off, inp, num_iter, minval, blocks, phase_lo, phase_hi, scratch, msg,
                        out):
        blk, tid, nt, ab0, M, F, S, O, L = agent_block(cuda.blockIdx.x, cuda.threadIdx.x, cuda.blockDim.x, ints, log_A,
                                                       out)
        i = blk // blocks  # the agent
        g = (blk - i * blocks) * nt + tid  # the thread within the agent's blocks
        ng = blocks * nt
        ab = 0 if log_A.shape[0] == 1 else i
        ll = scratch[i, :L]
        c = scratch[i, L:L + S]
        x = scratch[i, L + S:L + 2 * S]
        Q = scratch[i, L + 2 * S:L + 3 * S]
        mg = msg[i]
        iters = num_iter if F > 1 else 0
        n_msg = msg_off[M]
        for phase in range(phase_lo, phase_hi):
            if phase > phase_lo:
                barrier()
            if phase == 0:
                for p in range(g, L, ng):
                    ll[p] = log_likelihood_at(ints, log_A, ab, inp, i, 0, p, zero)
                for s in range(g, S, ng):
                    f, a = state_of(ints, F, s)
                    v = inp[i, O + s]
                    cs = math.log(v if v > minval else minval)
                    for m in range(M):
                        if index1(ints, KS, m) == 1 and index2(ints, DEPS, m, 0) == f:
                            cs += log_likelihood_at(ints, log_A, ab, inp, i, 0, index1(ints, LL_OFF, m) + a, zero)
                    c[s] = cs
                    Q[s] = 1 / (zero + index1(ints, NS, f))
            elif phase <= 2 * iters and phase % 2 == 1:  # every message, from this iteration's posteriors
                for e in range(g, n_msg, ng):
                    m = 0
                    while msg_off[m + 1] <= e:
                        m += 1
                    r = e - msg_off[m]
                    j = 0
                    while r >= index2(ints, DIMS, m, j):
                        r -= index2(ints, DIMS, m, j)
                        j += 1
                    base = index1(ints, LL_OFF, m)
                    if index1(ints, KS, m) == 2:
                        mg[e] = contract(ints, DEPS, DIMS, KS, m, ll, base, Q, 0, j, r, zero, one)
                    else:
                        mg[e] = contract(ints, DEPS, DIMS, KS, m, ll, base, Q, 0, j, r, zero64, one)
            elif phase <= 2 * iters:  # per factor: x = c + its messages, Q = softmax of the row
                for f in range(g, F, ng):
                    lo = index1(ints, S_OFF, f)
                    for a in range(index1(ints, NS, f)):
                        xs = c[lo + a]
                        for m in range(M):
                            k = index1(ints, KS, m)
                            if k < 2:
                                continue
                            off = msg_off[m]
                            for j in range(k):
                                if index2(ints, DEPS, m, j) == f:
                                    if k == 2:
                                        xs += cast(mg[off + a])
                                    else:
                                        xs = cast(xs + mg[off + a])
                                off += index2(ints, DIMS, m, j)
                        x[lo + a] = xs
                    for a in range(index1(ints, NS, f)):
                        Q[lo + a] = softmax_at(ints, x, lo + a, f)
            elif phase == 2 * iters + 1:  # one factor: pymdp's one-pass update
                if F == 1:
                    for s in range(g, S, ng):
                        Q[s] = softmax_at(ints, c, s, 0)
            else:
                for s in range(g, S, ng):
                    tick_out(ints, B[ab], inp, i, O, S, F, Q, s, out, zero, one)

    return fpi_tick_global
