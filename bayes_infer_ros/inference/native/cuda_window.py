"""``fused_cuda``'s VMP / MMP kernel: a whole window (every iteration, every step) of b agents in ONE CUDA launch.

The maths is ``sequence._sequence`` (pymdp 1.0.4's ``update_marginals`` with ``get_vmp_messages`` /
``get_mmp_messages``), one thread block per agent; threads own the window's states e = (t, s), t < T, s < S.
The owner of (t, f, a) computes, each iteration, everything that lands on it: its forward message (from step
t - 1's posteriors, or the log prior at the window's start and after an invalid transition; MMP halves it before a
valid transition), its backward messages (from every factor whose transition depends on f, at step t + 1; MMP
normalises each row of the marginalised transition and takes 0.5 log), and the likelihood messages of step t
(``cuda_kernels.likelihood_messages``). Then ``W = log q + tau (x - log q + past + fut)``, a barrier, the mean over
the factor's row subtracted and the softmax per row (each thread reduces its own row), a barrier.

Shared memory: ll (T L,), c (T S,), Q (T S,), W (T S,), log prior (S,): ``window_elements``. The arguments:
``schema.CudaWindowArgs`` (``inp`` rows: each agent's T observations, prior and T - 1 actions, the actions as
floats). The messages are ``cuda_kernels``' device helpers (``contract``, the one mixed-radix walk).
"""
from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from numba import cuda, float32, float64

from .cuda_kernels import (agent_block, contract, index1, index2, likelihood_messages, log_likelihood_at, state_of,
                           transition_row, unary_messages)
from .schema import BDEPS, BDIMS, BKS, NCONTROLS, NS, S_OFF


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
    return index1(ints, NCONTROLS, f) if u < 0 else u


@functools.lru_cache(maxsize=None)
def window_kernel(dtype_name: str) -> Any:
    """The VMP / MMP window kernel for float32 or float64; its arguments: ``schema.CudaWindowArgs``."""
    nb_dtype = {"float32": float32, "float64": float64}[dtype_name]
    cast = np.dtype(dtype_name).type
    zero, one, half = cast(0), cast(1), cast(0.5)
    messages = likelihood_messages(dtype_name)

    @cuda.jit
    def window(ints, log_A, Bs, has_B, inp, T, valid_steps, kind_vmp, num_iter, tau, minval, out):
        i, tid, nt, ab, M, F, S, O, L = agent_block(cuda.blockIdx.x, cuda.threadIdx.x, cuda.blockDim.x, ints, log_A,
                                                    out)
        base_prior = T * O
        base_act = T * O + S
        Bs_ab = Bs[ab]
        sh = cuda.shared.array(0, dtype=nb_dtype)
        ll = sh[:T * L]
        c = sh[T * L:T * L + T * S]
        Q = sh[T * L + T * S:T * L + 2 * T * S]
        W = sh[T * L + 2 * T * S:T * L + 3 * T * S]
        lnp = sh[T * L + 3 * T * S:T * L + 3 * T * S + S]
        for e in range(tid, T * L, nt):
            t = e // L
            ov, tv = _valid(inp, i, t, T, F, base_act, valid_steps)
            ll[e] = log_likelihood_at(ints, log_A, ab, inp, i, t * O, e - t * L, zero) if ov else zero
        for s in range(tid, S, nt):
            v = inp[i, base_prior + s]
            lnp[s] = math.log(v if v > minval else minval)
        cuda.syncthreads()
        for e in range(tid, T * S, nt):
            t = e // S
            f, a = state_of(ints, F, e - t * S)
            c[e] = unary_messages(ints, ll[t * L:], M, f, a, zero)
            Q[e] = 1 / (zero + index1(ints, NS, f))
        cuda.syncthreads()
        for _ in range(num_iter):
            for e in range(tid, T * S, nt):
                t = e // S
                s = e - t * S
                f, a = state_of(ints, F, s)
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
                        row, P = transition_row(ints, f, _control(inp, i, base_act, t - 1, F, f, ints), a)
                        fut = contract(ints, BDEPS, BDIMS, BKS, f, Bs_ab, row, Q, (t - 1) * S, -1, 0, zero, one)
                        if not kind_vmp:
                            fut = math.log(fut if fut > minval else minval)
                    if not kind_vmp and t < T - 1 and tv:
                        fut *= half
                # backward messages from every factor whose transition depends on f
                past = zero
                if has_B and t < T - 1 and tv:
                    for g in range(F):
                        for l in range(index1(ints, BKS, g)):
                            if index2(ints, BDEPS, g, l) != f:
                                continue
                            u = _control(inp, i, base_act, t, F, g, ints)
                            acc = zero
                            for b2 in range(index1(ints, NS, g)):
                                row, P = transition_row(ints, g, u, b2)
                                bl = contract(ints, BDEPS, BDIMS, BKS, g, Bs_ab, row, Q, t * S, l, a, zero, one)
                                if not kind_vmp:
                                    tot = zero
                                    for y in range(index2(ints, BDIMS, g, l)):
                                        tot += contract(ints, BDEPS, BDIMS, BKS, g, Bs_ab, row, Q, t * S, l, y, zero,
                                                        one)
                                    bl = bl / (tot if tot > minval else minval)
                                acc += Q[(t + 1) * S + index1(ints, S_OFF, g) + b2] * bl
                            if kind_vmp:
                                past += acc
                            else:
                                past += half * math.log(acc if acc > minval else minval)
                xs = messages(ints, ll[t * L:], Q[t * S:], M, f, a, c[e])
                q = Q[e]
                lq = math.log(q if q > minval else minval)
                W[e] = lq + tau * (xs - lq + past + fut)
            cuda.syncthreads()
            for e in range(tid, T * S, nt):
                t = e // S
                f, a = state_of(ints, F, e - t * S)
                lo = t * S + index1(ints, S_OFF, f)
                hi = t * S + index1(ints, S_OFF, f + 1)
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
