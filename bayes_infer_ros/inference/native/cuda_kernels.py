"""``fused_cuda``'s kernel: a whole FPI tick (all iterations and the next prior) of b agents in ONE CUDA launch.

Optional: needs numba's CUDA target (``numba.cuda``), imported only when the engine is built. On a machine
without a GPU the same kernel runs in numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``), which is how the
tests run it. numba compiles the kernel at run time through NVVM for the device's own compute capability (a
Jetson Orin's sm_87 included). See docs/gpu.md for the choice of technology and what a GPU session measures.

The maths is ``fused_numba``'s (``tick.fpi_tick``), pymdp 1.0.4's term by term, parallelised:

* one thread block per agent (``blockIdx.x``); its threads stride over the log-likelihood elements, then over
  the states s = (f, a) of the packed belief (S = sum n_f): every state is owned by one thread;
* block shared memory (dynamic) holds ``ll`` (L,), the constant term ``c`` (S,), the iteration's ``x`` (S,)
  and the posterior ``Q`` (S,): (L + 3 S) elements (``shared_elements``);
* ``ll_m[p] = sum_o o[o] log A_m[o, p]`` (zero observations skipped, as pymdp's ``xlogy``), once;
* ``c[s] = log_stable(prior[s]) + sum of the one-factor modalities' ll``; FPI from the uniform posterior:
  ``x[s] = c[s] + sum over modalities m with k_m >= 2 dependencies, f among them, of the all-but-one
  contraction of ll_m with the other factors' posteriors`` (the owning thread loops over the elements of ll_m
  whose f-index is a; a k >= 3 sum in float64 as fused_numba's), then ``Q = softmax per factor`` (each thread
  reduces its factor's row itself: n_f is small, and no second barrier is needed), ``num_iter`` times; one
  factor: pymdp's one-pass update softmax(c);
* the next prior (pymdp ``compute_expected_state``): ``out[1, s] = sum_p B_f[a, p, u_f] prod_j Q[dep_j, p_j]``.

Only the summation order differs from pymdp's (rounding level). The kernel's arguments: ``schema.CudaTickArgs``
(``inp`` (b, O + S + F): each agent's observation, prior and action, the action as floats: one transfer per tick).
The device helpers here (the mixed-radix walk ``contract``, ``log_likelihood_at``, ``unary_messages``,
``likelihood_messages``, ``transition_row``, ``state_of``, ``agent_block``) serve ``cuda_window``'s and
``cuda_large``'s kernels too. They read no ``cuda.*`` (thread and block indices, shared arrays, barriers): the
kernels do and pass what a helper needs. numba's CUDA simulator runs each thread as a Python thread and points a
device function's module-level ``cuda`` at the launch's simulated module on each call, then back at the real
``numba.cuda`` when that call returns, for every thread of the block at once: a helper called from another module's
kernel could read ``cuda.threadIdx`` after another thread's return had switched it back ("module 'numba.cuda' has
no attribute 'threadIdx'", issue 45 F12). A kernel's own module is switched for the whole launch.
"""
from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from numba import cuda, float32, float64

from .schema import A_OFF, B_OFF, BDEPS, BDIMS, BKS, DEPS, DIMS, HEADER_WIDTH, KS, LL_OFF, NCONTROLS, NS, O_OFF, S_OFF

# One block's dynamic shared memory, the limit every CUDA device since compute capability 2.0 gives without
# an opt-in (Jetson Orin and H100 allow more after cudaFuncSetAttribute, which numba's launch does not call).
SHARED_BYTES = 48 * 1024
MAX_THREADS = 256


def shared_elements(L: int, S: int) -> int:
    """Shared-memory elements of one block: the log likelihood (L,) and c, x, Q (S,) each."""
    return L + 3 * S


def threads_for(L: int, S: int) -> int:
    """Threads per block: a multiple of 32 covering the states (and up to 256 of the likelihood elements)."""
    need = max(S, min(L, MAX_THREADS), 32)
    return min(MAX_THREADS, 32 * ((need + 31) // 32))


@cuda.jit(device=True, inline=True)
def index1(ints, j, i):
    """Element i of index array j (a ``schema`` slot constant)."""
    return ints[ints[HEADER_WIDTH * j] + i]


@cuda.jit(device=True, inline=True)
def index2(ints, j, r, c):
    """Element (r, c) of the 2-D index array j."""
    return ints[ints[HEADER_WIDTH * j] + r * ints[HEADER_WIDTH * j + 2] + c]


@cuda.jit(device=True, inline=True)
def index_rows(ints, j):
    """The rows of index array j (M for ``KS``, F for ``NS``)."""
    return ints[HEADER_WIDTH * j + 1]


@cuda.jit(device=True, inline=True)
def agent_block(i, tid, nt, ints, log_A, out):
    """A kernel's place and the model's sizes: (agent i = the block, thread, threads, log A's row for agent i, M, F,
    S, O, L). The kernel passes its own ``cuda.blockIdx.x``, ``cuda.threadIdx.x`` and ``cuda.blockDim.x``: a device
    helper reads no ``cuda.*`` (the module docstring says why)."""
    M = index_rows(ints, KS)
    return (i, tid, nt, 0 if log_A.shape[0] == 1 else i, M, index_rows(ints, NS), out.shape[2],
            index1(ints, O_OFF, M), index1(ints, LL_OFF, M))


@cuda.jit(device=True, inline=True)
def state_of(ints, F, s):
    """(f, a): the factor whose states hold packed index s, and s's level in it."""
    f = 0
    while f < F - 1 and index1(ints, S_OFF, f + 1) <= s:
        f += 1
    return f, s - index1(ints, S_OFF, f)


@cuda.jit(device=True, inline=True)
def contract(ints, deps_j, dims_j, ks_j, row, vals, base, Q, qoff, fixed, level, acc, one):
    """The mixed-radix walk every message is: acc + sum over the row-major multi-indices p = (p_0, ..., p_{k-1}) of
    ``dims[row, :k]`` whose p_fixed is ``level`` of vals[base + p] * prod_{i != fixed} Q[qoff + s_off[dep_i] +
    p_i], in increasing p (fixed < 0: every p, a full contraction). ``deps_j``, ``dims_j``, ``ks_j``: the index
    arrays of the walk, (DEPS, DIMS, KS) for modality ``row``'s log likelihood (the message to its dependency
    ``fixed`` at ``level``) or (BDEPS, BDIMS, BKS) for factor ``row``'s transition (fixed < 0: the forward message
    and the prediction; else pymdp's ``_marginalise_others``)."""
    k = index1(ints, ks_j, row)
    P = 1
    for i in range(k):
        P *= index2(ints, dims_j, row, i)
    n_fixed, inner, lvl = 1, P, 0
    if fixed >= 0:
        n_fixed, inner, lvl = index2(ints, dims_j, row, fixed), 1, level
        for i in range(fixed + 1, k):
            inner *= index2(ints, dims_j, row, i)
    for hi in range(P // (n_fixed * inner)):
        for lo in range(inner):
            p = hi * n_fixed * inner + lvl * inner + lo
            w = one
            rem = p
            stride = P
            for i in range(k):
                stride //= index2(ints, dims_j, row, i)
                idx = rem // stride
                rem -= idx * stride
                if i != fixed:
                    w *= Q[qoff + index1(ints, S_OFF, index2(ints, deps_j, row, i)) + idx]
            acc += vals[base + p] * w
    return acc


@cuda.jit(device=True, inline=True)
def transition_row(ints, f, u, a):
    """Where row a of factor f's transition under control u starts in a row of B: (offset, P_f)."""
    n_f = index1(ints, NS, f)
    b_lo = index1(ints, B_OFF, f)
    P = (index1(ints, B_OFF, f + 1) - b_lo) // ((index1(ints, NCONTROLS, f) + 1) * n_f)
    return b_lo + u * n_f * P + a * P, P


@cuda.jit(device=True, inline=True)
def log_likelihood_at(ints, log_A, ab, inp, i, obs_base, p, zero):
    """Element p of one step's log likelihood (L,): sum_o o[o] log A_m[o, p - ll_off[m]] for the modality m that
    holds p, over the non-zero levels of its observation at inp[i, obs_base + o_off[m]:] (pymdp's ``xlogy``)."""
    m = 0
    while index1(ints, LL_OFF, m + 1) <= p:
        m += 1
    lo = index1(ints, LL_OFF, m)
    P = index1(ints, LL_OFF, m + 1) - lo
    o_lo = index1(ints, O_OFF, m)
    acc = zero
    for o in range(index1(ints, O_OFF, m + 1) - o_lo):
        w = inp[i, obs_base + o_lo + o]
        if w != 0:
            acc += w * log_A[ab, index1(ints, A_OFF, m) + o * P + (p - lo)]
    return acc


@cuda.jit(device=True, inline=True)
def unary_messages(ints, ll, M, f, a, acc):
    """acc + the one-dependency modalities' log likelihoods at level a of factor f (constant over iterations)."""
    for m in range(M):
        if index1(ints, KS, m) == 1 and index2(ints, DEPS, m, 0) == f:
            acc += ll[index1(ints, LL_OFF, m) + a]
    return acc


@functools.lru_cache(maxsize=None)
def likelihood_messages(dtype_name: str) -> Any:
    """The device function ``messages(ints, ll, Q, M, f, a, acc)``: acc + every message to level a of factor f from
    the modalities with two or more dependencies (``contract`` of their log likelihoods ``ll`` with the posteriors
    ``Q``); a k >= 3 sum in float64, as fused_numba's, and the result in ``dtype_name``."""
    cast = np.dtype(dtype_name).type
    zero, one, zero64 = cast(0), cast(1), np.float64(0)

    @cuda.jit(device=True, inline=True)
    def messages(ints, ll, Q, M, f, a, acc):
        for m in range(M):
            k = index1(ints, KS, m)
            if k < 2:
                continue
            for j in range(k):
                if index2(ints, DEPS, m, j) == f:
                    base = index1(ints, LL_OFF, m)
                    if k == 2:
                        acc += contract(ints, DEPS, DIMS, KS, m, ll, base, Q, 0, j, a, zero, one)
                    else:  # a long sum, in float64 as fused_numba's
                        acc = cast(acc + contract(ints, DEPS, DIMS, KS, m, ll, base, Q, 0, j, a, zero64, one))
        return acc

    return messages


@cuda.jit(device=True, inline=True)
def tick_out(ints, B_ab, inp, i, O, S, F, Q, s, out, zero, one):
    """Agent i's outputs at state s: its belief Q[s] and its next prior (pymdp ``compute_expected_state``: the
    forward ``contract`` of its model's B row ``B_ab`` under its action at inp[i, O + S:])."""
    f, a = state_of(ints, F, s)
    out[i, 0, s] = Q[s]
    row, P = transition_row(ints, f, int(inp[i, O + S + f]), a)
    out[i, 1, s] = contract(ints, BDEPS, BDIMS, BKS, f, B_ab, row, Q, 0, -1, 0, zero, one)


@cuda.jit(device=True, inline=True)
def softmax_at(ints, src, s, f):
    """softmax over factor f's row of src, at packed index s."""
    lo = index1(ints, S_OFF, f)
    hi = index1(ints, S_OFF, f + 1)
    mx = src[lo]
    for t in range(lo, hi):
        if src[t] > mx:
            mx = src[t]
    tot = src[lo] * 0
    for t in range(lo, hi):
        tot += math.exp(src[t] - mx)
    return math.exp(src[s] - mx) / tot


@functools.lru_cache(maxsize=None)
def fpi_tick_kernel(dtype_name: str) -> Any:
    """The CUDA kernel for float32 or float64 (compiled at the first launch, once per argument types); its
    arguments: ``schema.CudaTickArgs``."""
    nb_dtype = {"float32": float32, "float64": float64}[dtype_name]
    cast = np.dtype(dtype_name).type
    zero, one = cast(0), cast(1)
    messages = likelihood_messages(dtype_name)

    @cuda.jit
    def fpi_tick(ints, log_A, B, inp, num_iter, minval, out):
        i, tid, nt, ab, M, F, S, O, L = agent_block(cuda.blockIdx.x, cuda.threadIdx.x, cuda.blockDim.x, ints, log_A,
                                                    out)
        sh = cuda.shared.array(0, dtype=nb_dtype)
        ll = sh[:L]
        c = sh[L:L + S]
        x = sh[L + S:L + 2 * S]
        Q = sh[L + 2 * S:L + 3 * S]
        for p in range(tid, L, nt):
            ll[p] = log_likelihood_at(ints, log_A, ab, inp, i, 0, p, zero)
        cuda.syncthreads()
        # the constant term: log prior and the one-factor modalities; the uniform posterior
        for s in range(tid, S, nt):
            f, a = state_of(ints, F, s)
            v = inp[i, O + s]
            cs = unary_messages(ints, ll, M, f, a, math.log(v if v > minval else minval))
            c[s] = cs
            Q[s] = 1 / (zero + index1(ints, NS, f))
            x[s] = cs
        cuda.syncthreads()
        iters = num_iter if F > 1 else 0
        for _ in range(iters):
            for s in range(tid, S, nt):
                f, a = state_of(ints, F, s)
                x[s] = messages(ints, ll, Q, M, f, a, c[s])
            cuda.syncthreads()
            for s in range(tid, S, nt):
                f, a = state_of(ints, F, s)
                Q[s] = softmax_at(ints, x, s, f)
            cuda.syncthreads()
        if F == 1:
            for s in range(tid, S, nt):
                Q[s] = softmax_at(ints, c, s, 0)
            cuda.syncthreads()
        for s in range(tid, S, nt):
            tick_out(ints, B[ab], inp, i, O, S, F, Q, s, out, zero, one)

    return fpi_tick
