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

Only the summation order differs from pymdp's (rounding level). Shapes (O = sum m_i, F factors):
``ints``: ``tick.pack_tick_model``'s index arrays; ``log_A`` (bA, NA), ``B`` (bA, NB), bA = 1 (one
model shared by every agent) or b; ``inp`` (b, O + S + F): each agent's observation, prior and action (the
action as floats: one transfer per tick); ``out`` (b, 2, S): beliefs and next priors.
"""
from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from numba import cuda, float32, float64

# pack_tick_model's index arrays, in its order
A_OFF, LL_OFF, DEPS, DIMS, KS, NS, O_OFF, S_OFF, B_OFF, BDEPS, BDIMS, BKS, NCONTROLS = range(13)
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
def _i1(ints, j, i):
    """Element i of index array j."""
    return ints[ints[3 * j] + i]


@cuda.jit(device=True, inline=True)
def _i2(ints, j, r, c):
    """Element (r, c) of the 2-D index array j."""
    return ints[ints[3 * j] + r * ints[3 * j + 2] + c]


@cuda.jit(device=True, inline=True)
def _factor_of(ints, F, s):
    """The factor whose states hold packed index s."""
    f = 0
    while f < F - 1 and _i1(ints, S_OFF, f + 1) <= s:
        f += 1
    return f


@cuda.jit(device=True, inline=True)
def _message(ints, ll, Q, m, j, a, acc, one):
    """acc + the message of modality m to its j-th dependency at level a: the sum over ll_m's elements whose
    j-index is a, each times the other dependencies' posteriors (in dependency order)."""
    k = _i1(ints, KS, m)
    base = _i1(ints, LL_OFF, m)
    P = _i1(ints, LL_OFF, m + 1) - base
    n_j = _i2(ints, DIMS, m, j)
    inner = 1
    for i in range(j + 1, k):
        inner *= _i2(ints, DIMS, m, i)
    outer = P // (n_j * inner)
    for hi in range(outer):
        for lo in range(inner):
            p = hi * n_j * inner + a * inner + lo
            w = one
            rem = p
            stride = P
            for i in range(k):
                d = _i2(ints, DIMS, m, i)
                stride //= d
                idx = rem // stride
                rem -= idx * stride
                if i != j:
                    w *= Q[_i1(ints, S_OFF, _i2(ints, DEPS, m, i)) + idx]
            acc += ll[base + p] * w
    return acc


@cuda.jit(device=True, inline=True)
def _softmax_at(ints, src, F, s, f):
    """softmax over factor f's row of src, at packed index s."""
    lo = _i1(ints, S_OFF, f)
    hi = _i1(ints, S_OFF, f + 1)
    mx = src[lo]
    for t in range(lo, hi):
        if src[t] > mx:
            mx = src[t]
    tot = src[lo] * 0
    for t in range(lo, hi):
        tot += math.exp(src[t] - mx)
    return math.exp(src[s] - mx) / tot


@cuda.jit(device=True, inline=True)
def _predict_at(ints, B, ab, Q, f, a, u, zero, one):
    """Next prior of state a of factor f under control u: sum_p B_f[a, p, u] prod_j Q[dep_j, p_j]."""
    n_f = _i1(ints, NS, f)
    b_lo = _i1(ints, B_OFF, f)
    P = (_i1(ints, B_OFF, f + 1) - b_lo) // ((_i1(ints, NCONTROLS, f) + 1) * n_f)
    row = b_lo + u * n_f * P + a * P
    k = _i1(ints, BKS, f)
    acc = zero
    for p in range(P):
        rem = p
        stride = P
        w = one
        for i in range(k):
            stride //= _i2(ints, BDIMS, f, i)
            idx = rem // stride
            rem -= idx * stride
            w *= Q[_i1(ints, S_OFF, _i2(ints, BDEPS, f, i)) + idx]
        acc += B[ab, row + p] * w
    return acc


@functools.lru_cache(maxsize=None)
def fpi_tick_kernel(dtype_name: str) -> Any:
    """The CUDA kernel for float32 or float64 (compiled at the first launch, once per argument types)."""
    nb_dtype = {"float32": float32, "float64": float64}[dtype_name]
    cast = np.dtype(dtype_name).type
    zero, one, zero64 = cast(0), cast(1), np.float64(0)

    @cuda.jit
    def fpi_tick(ints, log_A, B, inp, num_iter, minval, out):
        i = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        ab = 0 if log_A.shape[0] == 1 else i
        M = ints[3 * KS + 1]
        F = ints[3 * NS + 1]
        S = out.shape[2]
        O = _i1(ints, O_OFF, M)
        L = _i1(ints, LL_OFF, M)
        sh = cuda.shared.array(0, dtype=nb_dtype)
        ll = sh[:L]
        c = sh[L:L + S]
        x = sh[L + S:L + 2 * S]
        Q = sh[L + 2 * S:L + 3 * S]
        # the log likelihood of every modality
        for p in range(tid, L, nt):
            m = 0
            while _i1(ints, LL_OFF, m + 1) <= p:
                m += 1
            lo = _i1(ints, LL_OFF, m)
            P = _i1(ints, LL_OFF, m + 1) - lo
            acc = zero
            for o in range(_i1(ints, O_OFF, m + 1) - _i1(ints, O_OFF, m)):
                w = inp[i, _i1(ints, O_OFF, m) + o]
                if w != 0:
                    acc += w * log_A[ab, _i1(ints, A_OFF, m) + o * P + (p - lo)]
            ll[p] = acc
        cuda.syncthreads()
        # the constant term: log prior and the one-factor modalities; the uniform posterior
        for s in range(tid, S, nt):
            f = _factor_of(ints, F, s)
            a = s - _i1(ints, S_OFF, f)
            v = inp[i, O + s]
            cs = math.log(v if v > minval else minval)
            for m in range(M):
                if _i1(ints, KS, m) == 1 and _i2(ints, DEPS, m, 0) == f:
                    cs += ll[_i1(ints, LL_OFF, m) + a]
            c[s] = cs
            Q[s] = 1 / (zero + _i1(ints, NS, f))
            x[s] = cs
        cuda.syncthreads()
        iters = num_iter if F > 1 else 0
        for _ in range(iters):
            for s in range(tid, S, nt):
                f = _factor_of(ints, F, s)
                a = s - _i1(ints, S_OFF, f)
                xs = c[s]
                for m in range(M):
                    k = _i1(ints, KS, m)
                    if k < 2:
                        continue
                    for j in range(k):
                        if _i2(ints, DEPS, m, j) == f:
                            if k == 2:
                                xs += _message(ints, ll, Q, m, j, a, zero, one)
                            else:  # a long sum, in float64 as fused_numba's
                                xs = cast(xs + _message(ints, ll, Q, m, j, a, zero64, one))
                x[s] = xs
            cuda.syncthreads()
            for s in range(tid, S, nt):
                Q[s] = _softmax_at(ints, x, F, s, _factor_of(ints, F, s))
            cuda.syncthreads()
        if F == 1:
            for s in range(tid, S, nt):
                Q[s] = _softmax_at(ints, c, F, s, 0)
            cuda.syncthreads()
        for s in range(tid, S, nt):
            f = _factor_of(ints, F, s)
            out[i, 0, s] = Q[s]
            u = int(inp[i, O + S + f])
            out[i, 1, s] = _predict_at(ints, B, ab, Q, f, s - _i1(ints, S_OFF, f), u, zero, one)

    return fpi_tick
