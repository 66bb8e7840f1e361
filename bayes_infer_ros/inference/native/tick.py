"""The engine's FPI step as one numba dispatch (optional: needs numba): ``fpi_tick_batched`` for b agents (one agent
is a row of one). Its arguments: ``schema.TickAgentsArgs``.

``fpi_tick_batched`` computes each agent's beliefs and next prior (``fpi`` then ``predict`` of the beliefs under its
action) with the model's index arrays packed in one (``ints``: ``arrays.pack_tick_model``), the scratch in one
allocation and the results written into the caller's array; ``fpi_tick_batched_entry`` returns its compiled entry
point (why each: TUNING.md beside this file, "The node's tick"). The agents share one model structure; their
parameters are either one model (``log_A`` / ``B`` with one row, every agent reads row 0: one agent, a fleet or a
multi-agent simulation running one model) or one model per agent (b rows: the engine's batch of b models). Agent i's
outputs are the same bits whatever the other rows.

``fpi_tick_batched`` is serial over the agents (one core). ``fpi_tick_agents_parallel`` runs it on contiguous blocks
of the agents at once, one per thread of numba's threading layer (``prange``), so agent i's outputs are its bits
whatever the split; where no thread-safe layer loads, ``NativeEngine.step`` runs the serial kernel on the
blocks from Python threads instead (``host.over_agent_blocks``; the kernel releases the GIL). Why ``prange``:
TUNING.md beside this file, "Many agents".
"""
import numba
import numpy as np

from .common import _n_max, _nobs_into, inline, njit, scratch_sizes
from .fp_mode import flush_subnormals, restore_fp_mode
from .fpi import _fpi_into
from .schema import A_OFF, B_OFF, BDEPS, BDIMS, BKS, DEPS, DIMS, HEADER_WIDTH, KS, LL_OFF, NCONTROLS, NS, O_OFF, S_OFF
from .transitions import _predict_into


@inline
def _ints1(ints, j):
    """Index array j of ``ints`` (a slot constant of ``schema``), 1-D."""
    o = ints[HEADER_WIDTH * j]
    return ints[o:o + ints[HEADER_WIDTH * j + 1]]


@inline
def _ints2(ints, j):
    """Index array j of ``ints``, 2-D."""
    o, r, c = ints[HEADER_WIDTH * j], ints[HEADER_WIDTH * j + 1], ints[HEADER_WIDTH * j + 2]
    return ints[o:o + r * c].reshape(r, c)


@inline
def _index(ints):
    """``ints``' 13 index arrays as views, in ``schema.ModelIndex``'s order."""
    return (_ints1(ints, A_OFF), _ints1(ints, LL_OFF), _ints2(ints, DEPS), _ints2(ints, DIMS), _ints1(ints, KS),
            _ints1(ints, NS), _ints1(ints, O_OFF), _ints1(ints, S_OFF), _ints1(ints, B_OFF), _ints2(ints, BDEPS),
            _ints2(ints, BDIMS), _ints1(ints, BKS), _ints1(ints, NCONTROLS))


@inline
def _tick_scratch(ll_off, deps, dims, ks, ns, o_off, bdeps, like):
    """One tick's scratch in two allocations (floats of ``like``'s dtype, int64), all zero, as views: (nobs (M,),
    idx (K,), idx_b, ll (L,), dbuf (2, half_max), wv (w_max,), c, x, Q, Qp (F, n_max), tmp (1, n_max))."""
    F, n_max, L, M, K = ns.shape[0], _n_max(ns), ll_off[-1], ks.shape[0], deps.shape[1]
    half_max, w_max = scratch_sizes(ll_off, dims, ks)
    FN = F * n_max
    w = np.zeros(L + 2 * half_max + w_max + 4 * FN + n_max, like.dtype)
    iw = np.zeros(M + K + max(bdeps.shape[1], 1), np.int64)
    o = L + 2 * half_max + w_max
    return (_nobs_into(o_off, iw[:M]), iw[M:M + K], iw[M + K:], w[:L], w[L:L + 2 * half_max].reshape(2, half_max),
            w[L + 2 * half_max:o], w[o:o + FN].reshape(F, n_max), w[o + FN:o + 2 * FN].reshape(F, n_max),
            w[o + 2 * FN:o + 3 * FN].reshape(F, n_max), w[o + 3 * FN:o + 4 * FN].reshape(F, n_max),
            w[o + 4 * FN:].reshape(1, n_max))


@njit
def fpi_tick_batched(ints, log_A, B, obs, prior, num_iter, minval, action, out):
    """b agents' FPI ticks (``schema.TickAgentsArgs``): obs (b, O), prior (b, S), action (b, F) -> out (b, 2, S) (see
    the module docstring). Returns -1, or the first agent whose action holds a control outside [0, num_controls)
    (then nothing is computed)."""
    return fpi_tick_range(ints, log_A, B, obs, prior, num_iter, minval, action, out, 0, obs.shape[0])


@njit
def fpi_tick_range(ints, log_A, B, obs, prior, num_iter, minval, action, out, lo, hi):
    """``fpi_tick_batched`` on the agents lo..hi-1 of its arrays (their rows of ``log_A`` / ``B`` too, unless those
    hold one row): the one body of the serial and the parallel kernels, so both compile it once and agent i's outputs
    are the same bits whatever the blocks. Returns -1, or the first agent in [lo, hi) whose action is out of range
    (then nothing is computed)."""
    a_off, ll_off, deps, dims, ks, ns, o_off, s_off, b_off, bdeps, bdims, bks, ncontrols = _index(ints)
    for i in range(lo, hi):
        for f in range(ns.shape[0]):
            if action[i, f] < 0 or action[i, f] >= ncontrols[f]:
                return i
    nobs, idx, idx_b, ll, dbuf, wv, c, x, Q, Qp, tmp = _tick_scratch(ll_off, deps, dims, ks, ns, o_off, bdeps, prior)
    shared = log_A.shape[0] == 1
    mode = flush_subnormals()
    for i in range(lo, hi):
        ab = 0 if shared else i
        _fpi_into(log_A[ab:ab + 1], a_off, ll_off, deps, dims, ks, ns, o_off, s_off, obs[i:i + 1], prior[i:i + 1],
                  num_iter, minval, out[i, :1], nobs, idx, ll, dbuf, wv, c, x, Q)
        _predict_into(B, ab, b_off, bdeps, bdims, bks, ncontrols, ns, s_off, out[i, 0], action[i], out[i, 1], Qp, tmp,
                      idx_b)
    restore_fp_mode(mode)
    return -1


def fpi_tick_batched_entry(dtype):
    """``fpi_tick_batched``'s compiled entry point for ``dtype`` (float32 or float64): a call without the
    dispatcher's type resolution. The caller passes exactly these types: ints (n,) int64, log_A and B 2-D, obs and
    prior 2-D of ``dtype``, action 2-D int32, out 3-D of ``dtype``, all C-contiguous; num_iter int, minval ``dtype``."""
    f = numba.from_dtype(np.dtype(dtype))
    arr = lambda t, nd: numba.types.Array(t, nd, "C")  # noqa: E731
    return fpi_tick_batched.compile((arr(numba.int64, 1), arr(f, 2), arr(f, 2), arr(f, 2), arr(f, 2), numba.types.int64,
                                     f, arr(numba.int32, 2), arr(f, 3)))


@numba.njit(nogil=True, parallel=True)
def fpi_tick_agents_parallel(ints, log_A, B, obs, prior, num_iter, minval, action, out, threads):
    """``fpi_tick_batched`` on ``threads`` contiguous blocks of the b agents at once (``schema.TickAgentsParallelArgs``;
    one block per thread of numba's threading layer, each ``fpi_tick_range``). Returns -1, or the first agent whose
    action holds a control outside [0, num_controls) (then nothing is computed for its block)."""
    b = obs.shape[0]
    first_bad = np.full(threads, -1, np.int64)
    for t in numba.prange(threads):
        first_bad[t] = fpi_tick_range(ints, log_A, B, obs, prior, num_iter, minval, action, out, t * b // threads,
                                      (t + 1) * b // threads)
    for t in range(threads):
        if first_bad[t] >= 0:
            return first_bad[t]
    return -1


def fpi_tick_agents_parallel_entry(dtype):
    """``fpi_tick_agents_parallel``'s compiled entry point for ``dtype``: the types of ``fpi_tick_batched_entry``'s,
    then ``threads`` (int)."""
    f = numba.from_dtype(np.dtype(dtype))
    arr = lambda t, nd: numba.types.Array(t, nd, "C")  # noqa: E731
    return fpi_tick_agents_parallel.compile((arr(numba.int64, 1), arr(f, 2), arr(f, 2), arr(f, 2), arr(f, 2),
                                             numba.types.int64, f, arr(numba.int32, 2), arr(f, 3), numba.types.int64))
