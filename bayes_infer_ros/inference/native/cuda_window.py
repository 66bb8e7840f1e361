"""``fused_cuda``'s VMP / MMP kernel: a whole window (every iteration, every step) of b agents in ONE CUDA launch.

The maths is ``sequence._sequence`` (pymdp 1.0.4's ``update_marginals`` with ``get_vmp_messages`` /
``get_mmp_messages``), one thread block per agent; threads own the window's states e = (t, s), t < T, s < S.
The owner of (t, f, a) computes, each iteration, everything that lands on it: its forward message (from step
t - 1's posteriors, or the log prior at the window's start and after an invalid transition; MMP halves it before a
valid transition), its backward messages (from every factor whose transition depends on f, at step t + 1; MMP
normalises each row of the marginalised transition and takes 0.5 log), and the likelihood messages of step t (as
``cuda_kernels._message``). Then ``W = log q + tau (x - log q + past + fut)``, a barrier, the mean over the factor's
row subtracted and the softmax per row (each thread reduces its own row), a barrier.

Shared memory: ll (T L,), c (T S,), Q (T S,), W (T S,), log prior (S,): ``window_elements``. ``inp`` rows:
each agent's T observations (T O), prior (S) and T - 1 actions (F each, as floats; negative = pymdp's neutral
transition). B / log B as NativeEngine's ``_B`` / ``_log_B`` (the neutral transition as control u_f).
"""
from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from numba import cuda, float32, float64

from .cuda_kernels import (A_OFF, B_OFF, BDEPS, BDIMS, BKS, DEPS, KS, LL_OFF, NCONTROLS, NS, O_OFF, S_OFF, _factor_of,
                           _i1, _i2, _message)


def window_elements(L: int, S: int, T: int) -> int:
    """Shared-memory elements of one block for a window of T steps."""
    return T * L + 3 * T * S + S


@cuda.jit(device=True, inline=True)
def _valid(inp, i, t, T, F, base_act, valid_steps):
    """(obs_valid[t], trans_valid[t]) of ``_sequence``: every step is valid without masks (valid_steps < 0)."""
    if valid_steps < 0:
        return True, True
    kk = min(max(valid_steps, 1), T)
    ov = t >= T - kk
    if t >= T - 1:
        return ov, False
    tv = ov and (t + 1 >= T - kk)
    for f in range(F):
        if inp[i, base_act + t * F + f] < 0:
            tv = False
    return ov, tv


@cuda.jit(device=True, inline=True)
def _control(inp, i, base_act, t, F, f, ints):
    u = int(inp[i, base_act + t * F + f])
    return _i1(ints, NCONTROLS, f) if u < 0 else u


@cuda.jit(device=True, inline=True)
def _trans_row(ints, Bs, ab, Q, qoff, f, u, a, skip, one):
    """sum_p Bs_f[a, p | u] prod_j Q[qoff + dep_j] (dependency ``skip`` left out of the product; -1: none),
    returned with the sum over the dependency ``skip``'s levels kept apart when skip >= 0: see ``_marg``."""
    n_f = _i1(ints, NS, f)
    b_lo = _i1(ints, B_OFF, f)
    P = (_i1(ints, B_OFF, f + 1) - b_lo) // ((_i1(ints, NCONTROLS, f) + 1) * n_f)
    row = b_lo + u * n_f * P + a * P
    k = _i1(ints, BKS, f)
    acc = Q[0] * 0
    for p in range(P):
        rem = p
        stride = P
        w = one
        for j in range(k):
            stride //= _i2(ints, BDIMS, f, j)
            idx = rem // stride
            rem -= idx * stride
            if j != skip:
                w *= Q[qoff + _i1(ints, S_OFF, _i2(ints, BDEPS, f, j)) + idx]
        acc += Bs[ab, row + p] * w
    return acc


@cuda.jit(device=True, inline=True)
def _marg(ints, Bs, ab, Q, qoff, f, u, a, l, y, one):
    """bl[l, a, y]: factor f's transition at row a, its l-th dependency at level y, the others contracted with
    their posteriors at Q[qoff:] (pymdp ``_marginalise_others``)."""
    n_f = _i1(ints, NS, f)
    b_lo = _i1(ints, B_OFF, f)
    P = (_i1(ints, B_OFF, f + 1) - b_lo) // ((_i1(ints, NCONTROLS, f) + 1) * n_f)
    row = b_lo + u * n_f * P + a * P
    k = _i1(ints, BKS, f)
    inner = 1
    for j in range(l + 1, k):
        inner *= _i2(ints, BDIMS, f, j)
    n_l = _i2(ints, BDIMS, f, l)
    acc = Q[0] * 0
    for hi in range(P // (n_l * inner)):
        for lo in range(inner):
            p = hi * n_l * inner + y * inner + lo
            rem = p
            stride = P
            w = one
            for j in range(k):
                stride //= _i2(ints, BDIMS, f, j)
                idx = rem // stride
                rem -= idx * stride
                if j != l:
                    w *= Q[qoff + _i1(ints, S_OFF, _i2(ints, BDEPS, f, j)) + idx]
            acc += Bs[ab, row + p] * w
    return acc


@functools.lru_cache(maxsize=None)
def window_kernel(dtype_name: str) -> Any:
    """The VMP / MMP window kernel for float32 or float64."""
    nb_dtype = {"float32": float32, "float64": float64}[dtype_name]
    cast = np.dtype(dtype_name).type
    zero, one, half, zero64 = cast(0), cast(1), cast(0.5), np.float64(0)

    @cuda.jit
    def window(ints, log_A, Bs, inp, T, valid_steps, kind_vmp, has_B, num_iter, tau, minval, out):
        i = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        ab = 0 if log_A.shape[0] == 1 else i
        M = ints[3 * KS + 1]
        F = ints[3 * NS + 1]
        S = out.shape[2]
        O = _i1(ints, O_OFF, M)
        L = _i1(ints, LL_OFF, M)
        base_prior = T * O
        base_act = T * O + S
        sh = cuda.shared.array(0, dtype=nb_dtype)
        ll = sh[:T * L]
        c = sh[T * L:T * L + T * S]
        Q = sh[T * L + T * S:T * L + 2 * T * S]
        W = sh[T * L + 2 * T * S:T * L + 3 * T * S]
        lnp = sh[T * L + 3 * T * S:T * L + 3 * T * S + S]
        for e in range(tid, T * L, nt):
            t = e // L
            p = e - t * L
            ov, tv = _valid(inp, i, t, T, F, base_act, valid_steps)
            m = 0
            while _i1(ints, LL_OFF, m + 1) <= p:
                m += 1
            lo = _i1(ints, LL_OFF, m)
            P = _i1(ints, LL_OFF, m + 1) - lo
            acc = zero
            if ov:
                for o in range(_i1(ints, O_OFF, m + 1) - _i1(ints, O_OFF, m)):
                    w = inp[i, t * O + _i1(ints, O_OFF, m) + o]
                    if w != 0:
                        acc += w * log_A[ab, _i1(ints, A_OFF, m) + o * P + (p - lo)]
            ll[e] = acc
        for s in range(tid, S, nt):
            v = inp[i, base_prior + s]
            lnp[s] = math.log(v if v > minval else minval)
        cuda.syncthreads()
        for e in range(tid, T * S, nt):
            t = e // S
            s = e - t * S
            f = _factor_of(ints, F, s)
            a = s - _i1(ints, S_OFF, f)
            cs = zero
            for m in range(M):
                if _i1(ints, KS, m) == 1 and _i2(ints, DEPS, m, 0) == f:
                    cs += ll[t * L + _i1(ints, LL_OFF, m) + a]
            c[e] = cs
            Q[e] = 1 / (zero + _i1(ints, NS, f))
        cuda.syncthreads()
        for _ in range(num_iter):
            for e in range(tid, T * S, nt):
                t = e // S
                s = e - t * S
                f = _factor_of(ints, F, s)
                a = s - _i1(ints, S_OFF, f)
                ov, tv = _valid(inp, i, t, T, F, base_act, valid_steps)
                # forward message
                fut = zero
                if not has_B:
                    if not kind_vmp:
                        fut = lnp[s]
                else:
                    ov0, tv_prev = _valid(inp, i, t - 1, T, F, base_act, valid_steps) if t > 0 else (True, False)
                    if t == 0 or not tv_prev:
                        fut = lnp[s]
                    else:
                        u = _control(inp, i, base_act, t - 1, F, f, ints)
                        fut = _trans_row(ints, Bs, ab, Q, (t - 1) * S, f, u, a, -1, one)
                        if not kind_vmp:
                            fut = math.log(fut if fut > minval else minval)
                    if not kind_vmp and t < T - 1 and tv:
                        fut *= half
                # backward messages from every factor whose transition depends on f
                past = zero
                if has_B and t < T - 1 and tv:
                    for g in range(F):
                        for l in range(_i1(ints, BKS, g)):
                            if _i2(ints, BDEPS, g, l) != f:
                                continue
                            u = _control(inp, i, base_act, t, F, g, ints)
                            n_g = _i1(ints, NS, g)
                            acc = zero
                            for b2 in range(n_g):
                                bl = _marg(ints, Bs, ab, Q, t * S, g, u, b2, l, a, one)
                                if not kind_vmp:
                                    tot = zero
                                    for y in range(_i2(ints, BDIMS, g, l)):
                                        tot += _marg(ints, Bs, ab, Q, t * S, g, u, b2, l, y, one)
                                    bl = bl / (tot if tot > minval else minval)
                                acc += Q[(t + 1) * S + _i1(ints, S_OFF, g) + b2] * bl
                            if kind_vmp:
                                past += acc
                            else:
                                past += half * math.log(acc if acc > minval else minval)
                xs = c[e]
                for m in range(M):
                    k = _i1(ints, KS, m)
                    if k < 2:
                        continue
                    for j in range(k):
                        if _i2(ints, DEPS, m, j) == f:
                            if k == 2:
                                xs += _message(ints, ll[t * L:], Q[t * S:], m, j, a, zero, one)
                            else:
                                xs = cast(xs + _message(ints, ll[t * L:], Q[t * S:], m, j, a, zero64, one))
                q = Q[e]
                lq = math.log(q if q > minval else minval)
                W[e] = lq + tau * (xs - lq + past + fut)
            cuda.syncthreads()
            for e in range(tid, T * S, nt):
                t = e // S
                s = e - t * S
                f = _factor_of(ints, F, s)
                lo = t * S + _i1(ints, S_OFF, f)
                hi = t * S + _i1(ints, S_OFF, f + 1)
                mean = zero
                for r in range(lo, hi):
                    mean += W[r]
                mean = mean / cast(hi - lo)
                mx = W[lo] - mean
                for r in range(lo, hi):
                    if W[r] - mean > mx:
                        mx = W[r] - mean
                tot = zero
                for r in range(lo, hi):
                    tot += math.exp((W[r] - mean) - mx)
                Q[e] = math.exp((W[e] - mean) - mx) / tot
            cuda.syncthreads()
        for e in range(tid, T * S, nt):
            t = e // S
            out[i, t, e - t * S] = Q[e]

    return window
