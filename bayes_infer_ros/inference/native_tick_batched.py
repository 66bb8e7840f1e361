"""``fused_numba``'s FPI tick for many agents in one dispatch (optional: needs numba; see ``native_kernels.py``).

``fpi_tick_batched`` is ``native_kernels.fpi_tick`` with a leading agent axis: b agents' beliefs and next priors
in one call. The agents share one model structure; their parameters are either one model (log A / B with one
row, every agent reads row 0: a fleet or a multi-agent simulation running one model) or one model per agent
(b rows: the engine's batch of b models). Per agent the maths is ``fpi_tick``'s, call for call: the same helpers
in the same order on the same scratch, so agent i's outputs are the bits of an unbatched tick of its inputs.

Shapes (O = sum m_i, S = sum n_f, F factors):

* ``ints``: ``native_kernels.pack_tick_model``'s index arrays;
* ``log_A`` (bA, NA) and ``B`` (bA, NB), bA = 1 or b: NativeEngine's ``_log_A`` / ``_B``;
* ``obs`` (b, O), ``prior`` (b, S), ``action`` (b, F) int32 -> ``out`` (b, 2, S): beliefs at ``out[:, 0]``, the
  next prior (pymdp ``compute_expected_state`` under ``action``) at ``out[:, 1]``.

Serial over the agents (one core): a multi-core host runs several calls on slices of the agents from threads
(the kernel releases the GIL).
"""
import numba
import numpy as np

from .native_kernels import (_fpi_into, _ints1, _ints2, _n_max, _nobs_into, _predict_into, flush_subnormals,
                             restore_fp_mode, scratch_sizes)


@numba.njit(nogil=True)
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
