"""The transition side of fused_numba's kernels (optional: needs numba): forward and backward messages through B
(VMP / MMP), and pymdp's ``compute_expected_state`` (``predict``, the next prior of the node's tick).

B / log B are (b, total): factor f's transitions at b_off[f], laid out (u_f + 1, n_f, P_f) with the neutral
transition (1 / n_f) as control u_f, where a negative action points.
"""
import numpy as np

from .common import _n_max, inline, njit
from .fp_mode import flush_subnormals, restore_fp_mode

@inline
def _step_odometer(idx, bdims, f, k):
    """Advance a row-major multi-index over bdims[f, :k] (the last position varies fastest)."""
    j = k - 1
    while j >= 0:
        idx[j] += 1
        if idx[j] < bdims[f, j]:
            return
        idx[j] = 0
        j -= 1


@inline
def forward(Bs, bb, b_base, n_f, P, bdeps, bdims, f, k, Q, qr, out, orr, take_log, minval, idx):
    """out[orr, a] = sum_p Bs[bb, b_base + a * P + p] * prod_j Q[qr + bdeps[f, j], idx_j]  (log_stable of it when
    take_log).

    Bs holds log B for VMP (linear message) or B for MMP and the prediction. idx: (>= k,) int64 scratch."""
    for a in range(n_f):
        out[orr, a] = 0.0
    if k == 1:  # one dependency: a matrix-vector product, in the same order as the general loop below
        g = qr + bdeps[f, 0]
        for p in range(P):
            w = Q[g, p]
            for a in range(n_f):
                out[orr, a] += Bs[bb, b_base + a * P + p] * w
    else:
        for j in range(k):
            idx[j] = 0
        for p in range(P):
            w = Q[qr + bdeps[f, 0], idx[0]]
            for j in range(1, k):
                w *= Q[qr + bdeps[f, j], idx[j]]
            for a in range(n_f):
                out[orr, a] += Bs[bb, b_base + a * P + p] * w
            _step_odometer(idx, bdims, f, k)
    if take_log:
        for a in range(n_f):
            v = out[orr, a]
            out[orr, a] = np.log(v if v > minval else minval)


@inline
def normalise_rows(Bs, bb, b_base, n_i, n_f, minval, out, orow):
    """out[orow, a n_f + x] = B[a, x] / max(sum_x B[a, x], minval): MMP's row-normalised transition of a factor
    with one dependency (as ``backward`` normalises bl), constant over the iterations."""
    for a in range(n_i):
        row = b_base + a * n_f
        tot = minval - minval
        for x in range(n_f):
            tot += Bs[bb, row + x]
        tot = tot if tot > minval else minval
        for x in range(n_f):
            out[orow, a * n_f + x] = Bs[bb, row + x] / tot


@inline
def backward(Bs, bb, b_base, n_i, P, bdeps, bdims, i, k, Q, qr, qn, n_max, kind_vmp, minval, half, past, pr,
             bl, idx, vals, prefix, suffix):
    """Factor i's backward messages to each of its dependencies, added into past[pr + dependency, :].

    bl (K, n_i, n_max) scratch: bl[l, a, x] = sum over the other dependencies of B_i[a, ..., x, ...] times their
    posteriors Q[qr + ., :] (pymdp ``_marginalise_others``). VMP (Bs = log B): past[d_l, x] += sum_a q_next[a]
    bl[l, a, x], with q_next = Q[qn, :]. MMP (Bs = B): each row normalised over x, past[d_l, x] +=
    0.5 log_stable(sum_a q_next[a] bl_norm[a, x]). idx (K,) int64, vals / prefix / suffix (K + 1,): scratch."""
    for j in range(k):
        idx[j] = 0
    for l in range(k):
        for a in range(n_i):
            for x in range(n_max):
                bl[l, a, x] = 0.0
    for p in range(P):
        prefix[0] = 1.0
        for j in range(k):
            vals[j] = Q[qr + bdeps[i, j], idx[j]]
            prefix[j + 1] = prefix[j] * vals[j]
        suffix[k] = 1.0
        for j in range(k - 1, -1, -1):
            suffix[j] = suffix[j + 1] * vals[j]
        for l in range(k):
            w = prefix[l] * suffix[l + 1]
            for a in range(n_i):
                bl[l, a, idx[l]] += Bs[bb, b_base + a * P + p] * w
        _step_odometer(idx, bdims, i, k)
    for l in range(k):
        f = pr + bdeps[i, l]
        n_f = bdims[i, l]
        if not kind_vmp:
            for a in range(n_i):
                tot = minval - minval
                for x in range(n_f):
                    tot += bl[l, a, x]
                tot = tot if tot > minval else minval
                for x in range(n_f):
                    bl[l, a, x] = bl[l, a, x] / tot
        for x in range(n_f):
            acc = minval - minval
            for a in range(n_i):
                acc += Q[qn, a] * bl[l, a, x]
            if kind_vmp:
                past[f, x] += acc
            else:
                past[f, x] += half * np.log(acc if acc > minval else minval)


@njit
def _predict(B, b_off, bdeps, bdims, bks, ncontrols, ns, s_off, b_index, q, action, out):
    """pymdp compute_expected_state: out_f = sum over B_f[:, deps..., action_f] times the deps' posteriors."""
    n_max = _n_max(ns)
    _predict_into(B, b_index, b_off, bdeps, bdims, bks, ncontrols, ns, s_off, q, action, out,
                  np.zeros((ns.shape[0], n_max), q.dtype), np.zeros((1, n_max), q.dtype),
                  np.zeros(max(bdeps.shape[1], 1), np.int64))


@inline
def _predict_into(B, b_index, b_off, bdeps, bdims, bks, ncontrols, ns, s_off, q, action, out, Qp, tmp, idx):
    """``_predict`` with its scratch given: Qp (F, n_max), tmp (1, n_max), idx (>= 1,) int64, all zero."""
    F = ns.shape[0]
    for f in range(F):
        for a in range(ns[f]):
            Qp[f, a] = q[s_off[f] + a]
    for f in range(F):
        u = action[f]
        P = (b_off[f + 1] - b_off[f]) // ((ncontrols[f] + 1) * ns[f])
        forward(B, b_index, b_off[f] + u * ns[f] * P, ns[f], P, bdeps, bdims, f, bks[f], Qp, 0, tmp, 0, False, 0.0,
                idx)
        for a in range(ns[f]):
            out[s_off[f] + a] = tmp[0, a]


# The entry points set the floating-point mode around a call of their kernel (not inside it: TUNING.md).
@njit
def predict_rows(B, b_off, bdeps, bdims, bks, ncontrols, ns, s_off, q, action, out):
    """pymdp compute_expected_state of b rows: q (b, S), action (b, F) -> out (b, S), row i under B's row i (or its
    one row: a model every row shares). Returns -1, or the first row whose action holds a control outside
    [0, num_controls) (then nothing is computed)."""
    F, n_max = ns.shape[0], _n_max(ns)
    for i in range(q.shape[0]):
        for f in range(F):
            if action[i, f] < 0 or action[i, f] >= ncontrols[f]:
                return i
    Qp, tmp = np.zeros((F, n_max), q.dtype), np.zeros((1, n_max), q.dtype)
    idx = np.zeros(max(bdeps.shape[1], 1), np.int64)
    shared = B.shape[0] == 1
    mode = flush_subnormals()
    for i in range(q.shape[0]):
        _predict_into(B, 0 if shared else i, b_off, bdeps, bdims, bks, ncontrols, ns, s_off, q[i], action[i], out[i],
                      Qp, tmp, idx)
    restore_fp_mode(mode)
    return -1


@njit
def predict(B, b_off, bdeps, bdims, bks, ncontrols, ns, s_off, b_index, q, action, out):
    """pymdp compute_expected_state: q (S,), action (F,) -> out (S,) (``schema.PredictArgs``; see ``_predict``)."""
    mode = flush_subnormals()
    _predict(B, b_off, bdeps, bdims, bks, ncontrols, ns, s_off, b_index, q, action, out)
    restore_fp_mode(mode)

