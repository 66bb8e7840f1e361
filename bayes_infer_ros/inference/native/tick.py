"""The node's FPI tick as one numba dispatch (optional: needs numba): ``fpi_tick`` for one agent, and
``fpi_tick_batched`` for b agents.

``fpi_tick`` computes one model's beliefs and the next prior (``fpi`` then ``predict`` of the beliefs under the
action) with the model's arrays packed in two (``arrays.pack_tick_model``), the scratch in one allocation and the results
written into the caller's array; ``fpi_tick_entry`` returns its compiled entry point (why each: TUNING.md beside
this file, "The node's tick").

``fpi_tick_batched`` is ``fpi_tick`` with a leading agent axis. The agents share one model structure; their
parameters are either one model (log A / B with one row, every agent reads row 0: a fleet or a multi-agent
simulation running one model) or one model per agent (b rows: the engine's batch of b models). Per agent the maths
is ``fpi_tick``'s, call for call: the same helpers in the same order on the same scratch, so agent i's outputs are
the bits of an unbatched tick of its inputs. Shapes (O = sum m_i, S = sum n_f, F factors):

* ``ints``: ``arrays.pack_tick_model``'s index arrays;
* ``log_A`` (bA, NA) and ``B`` (bA, NB), bA = 1 or b: ``NativeModel.log_A`` / ``.B``;
* ``obs`` (b, O), ``prior`` (b, S), ``action`` (b, F) int32 -> ``out`` (b, 2, S): beliefs at ``out[:, 0]``, the
  next prior (pymdp ``compute_expected_state`` under ``action``) at ``out[:, 1]``.

Serial over the agents (one core): a multi-core host runs several calls on slices of the agents from threads
(the kernel releases the GIL).
"""
import numba
import numpy as np

from .common import _n_max, _nobs_into, inline, njit, scratch_sizes
from .fp_mode import flush_subnormals, restore_fp_mode
from .fpi import _fpi_into
from .transitions import _predict_into


@inline
def _ints1(ints, j):
    o = ints[3 * j]
    return ints[o:o + ints[3 * j + 1]]


@inline
def _ints2(ints, j):
    o, r, c = ints[3 * j], ints[3 * j + 1], ints[3 * j + 2]
    return ints[o:o + r * c].reshape(r, c)


@njit
def fpi_tick(ints, floats, n_log_A, obs, prior, num_iter, minval, action, out):
    """One model's FPI tick in one dispatch: obs (O,), prior (S,), action (F,) -> out (2, S): the beliefs (row 0)
    and the next step's prior (row 1), ``fpi`` then ``predict`` of the beliefs under ``action``.
    ints / floats: ``pack_tick_model`` of (a_off, ll_off, deps, dims, ks, ns, o_off, s_off, b_off, bdeps, bdims,
    bks, ncontrols) and (log A, B)."""
    a_off, ll_off, deps, dims = _ints1(ints, 0), _ints1(ints, 1), _ints2(ints, 2), _ints2(ints, 3)
    ks, ns, o_off, s_off = _ints1(ints, 4), _ints1(ints, 5), _ints1(ints, 6), _ints1(ints, 7)
    b_off, bdeps, bdims, bks = _ints1(ints, 8), _ints2(ints, 9), _ints2(ints, 10), _ints1(ints, 11)
    ncontrols = _ints1(ints, 12)
    log_A = floats[:n_log_A].reshape(1, n_log_A)
    B = floats[n_log_A:].reshape(1, floats.shape[0] - n_log_A)
    F, n_max, S, L, M = ns.shape[0], _n_max(ns), prior.shape[0], ll_off[-1], ks.shape[0]
    half_max, w_max = scratch_sizes(ll_off, dims, ks)
    FN = F * n_max
    w = np.zeros(L + 2 * half_max + w_max + 4 * FN + n_max, prior.dtype)
    iw = np.zeros(M + deps.shape[1] + max(bdeps.shape[1], 1), np.int64)
    nobs = _nobs_into(o_off, iw[:M])
    o = L + 2 * half_max + w_max
    mode = flush_subnormals()
    _fpi_into(log_A, a_off, ll_off, deps, dims, ks, ns, o_off, s_off, obs.reshape(1, obs.shape[0]),
              prior.reshape(1, S), num_iter, minval, out[:1], nobs, iw[M:M + deps.shape[1]], w[:L],
              w[L:L + 2 * half_max].reshape(2, half_max), w[L + 2 * half_max:o], w[o:o + FN].reshape(F, n_max),
              w[o + FN:o + 2 * FN].reshape(F, n_max), w[o + 2 * FN:o + 3 * FN].reshape(F, n_max))
    _predict_into(B, 0, b_off, bdeps, bdims, bks, ncontrols, ns, s_off, out[0], action, out[1],
                  w[o + 3 * FN:o + 4 * FN].reshape(F, n_max), w[o + 4 * FN:].reshape(1, n_max), iw[M + deps.shape[1]:])
    restore_fp_mode(mode)


def fpi_tick_entry(dtype):
    """``fpi_tick``'s compiled entry point for ``dtype`` (float32 or float64), loaded from numba's cache or compiled:
    a call without the dispatcher's type resolution. The caller passes
    exactly the signature's types: C-contiguous 1-D arrays of ``dtype`` (int64 / int32 where the signature says)."""
    vec = lambda dt: numba.types.Array(numba.from_dtype(np.dtype(dt)), 1, "C")  # noqa: E731
    f = numba.from_dtype(np.dtype(dtype))
    return fpi_tick.compile((vec(np.int64), vec(dtype), numba.types.int64, vec(dtype), vec(dtype), numba.types.int64,
                             f, vec(np.int32), numba.types.Array(f, 2, "C")))


@njit
def fpi_tick_batched(ints, log_A, B, obs, prior, num_iter, minval, action, out):
    """b agents' FPI ticks: obs (b, O), prior (b, S), action (b, F) -> out (b, 2, S) (see the module docstring).
    Returns -1, or the first agent whose action holds a control outside [0, num_controls) (then nothing is
    computed)."""
    a_off, ll_off, deps, dims = _ints1(ints, 0), _ints1(ints, 1), _ints2(ints, 2), _ints2(ints, 3)
    ks, ns, o_off, s_off = _ints1(ints, 4), _ints1(ints, 5), _ints1(ints, 6), _ints1(ints, 7)
    b_off, bdeps, bdims, bks = _ints1(ints, 8), _ints2(ints, 9), _ints2(ints, 10), _ints1(ints, 11)
    ncontrols = _ints1(ints, 12)
    F, n_max, L, M = ns.shape[0], _n_max(ns), ll_off[-1], ks.shape[0]
    half_max, w_max = scratch_sizes(ll_off, dims, ks)
    FN = F * n_max
    w = np.zeros(L + 2 * half_max + w_max + 4 * FN + n_max, prior.dtype)
    iw = np.zeros(M + deps.shape[1] + max(bdeps.shape[1], 1), np.int64)
    nobs = _nobs_into(o_off, iw[:M])
    o = L + 2 * half_max + w_max
    ll, dbuf, wv = w[:L], w[L:L + 2 * half_max].reshape(2, half_max), w[L + 2 * half_max:o]
    c, x, Q = w[o:o + FN].reshape(F, n_max), w[o + FN:o + 2 * FN].reshape(F, n_max), w[o + 2 * FN:o + 3 * FN].reshape(F, n_max)
    Qp, tmp = w[o + 3 * FN:o + 4 * FN].reshape(F, n_max), w[o + 4 * FN:].reshape(1, n_max)
    idx, idx_b = iw[M:M + deps.shape[1]], iw[M + deps.shape[1]:]
    for i in range(obs.shape[0]):
        for f in range(F):
            if action[i, f] < 0 or action[i, f] >= ncontrols[f]:
                return i
    shared = log_A.shape[0] == 1
    mode = flush_subnormals()
    for i in range(obs.shape[0]):
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
