"""Free energy and surprise as fused_numba kernels (optional: needs numba); the maths and its definitions are
``..free_energy``'s (pymdp 1.0.4's ``calc_vfe``), term for term.

* ``surprise_rows``: each modality's surprise under the prior predictive, for b rows;
* ``free_energy_rows``: the packed free-energy terms of b posteriors, one step (FPI: T = 1, no transitions) or a
  window of T steps (VMP / MMP, with pymdp's masks);
* ``fpi_tick_evidence_batched``: the engine's FPI step with both, in one dispatch, for b agents: each reading's
  surprise under the step's prior, the readings past their gate left out (no evidence), ``fpi_tick_batched``'s
  beliefs and next priors, and the free energy of the beliefs; ``fpi_tick_evidence_batched_entry`` returns its
  compiled entry point.

The model arrays are NativeEngine's: ``log_A`` (bA, NA) with modality m's (m_m, P_m) at ``a_off[m]``, log B (bA, NB)
with factor f's (u_f + 1, n_f, P_f) at ``b_off[f]``; bA = 1 (every row reads the one model) or b (row i reads
model i). Packed rows: observations (O,), states (S,); the terms of one step ``(M + 3 F + 1,)`` laid out as
``free_energy.FreeEnergy`` reads them.
"""
import numba
import numpy as np

from .common import _n_max, _nobs, _nobs_into, inline, njit, scratch_sizes
from .contractions import log_likelihoods
from .fp_mode import flush_subnormals, restore_fp_mode
from .fpi import _fpi_into
from .schema import NCONTROLS, NS
from .tick import _index, _ints1
from .transitions import _predict_into, _step_odometer


@inline
def _expect(vals, base, deps, dims, r, k, q, s_off, idx, zero):
    """sum_p vals[base + p] * prod_j q[s_off[deps[r, j]] + i_j], p the row-major index of (i_0, ..., i_{k-1}) over
    dims[r, :k]: a tensor over some factors' states contracted with their (packed) marginals. idx (>= k,) scratch."""
    if k == 1:
        o = s_off[deps[r, 0]]
        acc = zero
        for a in range(dims[r, 0]):
            acc += vals[base + a] * q[o + a]
        return acc
    if k == 2:
        o0, o1, n1 = s_off[deps[r, 0]], s_off[deps[r, 1]], dims[r, 1]
        acc = zero
        for a in range(dims[r, 0]):
            row = zero
            for c in range(n1):
                row += vals[base + a * n1 + c] * q[o1 + c]
            acc += row * q[o0 + a]
        return acc
    P = 1
    for j in range(k):
        idx[j] = 0
        P *= dims[r, j]
    acc = zero
    for p in range(P):
        w = q[s_off[deps[r, 0]] + idx[0]]
        for j in range(1, k):
            w *= q[s_off[deps[r, j]] + idx[j]]
        acc += vals[base + p] * w
        _step_odometer(idx, dims, r, k)
    return acc


@inline
def _surprise_into(A, a_off, ll, ll_off, deps, dims, ks, o, o_off, prior, s_off, e, idx, minval, out):
    """out[m] = -ln sum_s exp(ll_m(s)) prod prior (0 for a modality whose reading is all zero); e (L,) scratch.
    A (NA,): the model's likelihoods clipped at minval, laid out as its log A (modality m's (m_m, P_m) at a_off[m]):
    a one-hot reading's exp(ll_m) is its level's row of A, read as it is; any other reading takes exp(ll_m - max)."""
    zero = minval - minval
    one = minval / minval
    for m in range(ks.shape[0]):
        nonzero, level = 0, -1
        for x in range(o_off[m], o_off[m + 1]):
            if o[x] != zero:
                nonzero += 1
                level = x - o_off[m] if o[x] == one else -1
        if nonzero == 0:
            out[m] = zero
            continue
        lo, hi = ll_off[m], ll_off[m + 1]
        if nonzero == 1 and level >= 0:
            base = a_off[m] + level * (hi - lo)
            out[m] = -np.log(_expect(A, base, deps, dims, m, ks[m], prior, s_off, idx, zero))
            continue
        top = ll[lo]
        for p in range(lo, hi):
            if ll[p] > top:
                top = ll[p]
        for p in range(lo, hi):
            e[p] = np.exp(ll[p] - top)
        out[m] = -(top + np.log(_expect(e, lo, deps, dims, m, ks[m], prior, s_off, idx, zero)))


@inline
def _step_into(ll, ll_off, deps, dims, ks, ns, s_off, q, prior, with_prior, with_entropy, scale, idx, minval, out):
    """One step's terms into out (M + 3 F + 1,): accuracy per modality, neg entropy (``with_entropy``) and
    (``with_prior``) the prior cross entropy per factor, all times ``scale``; the transition terms and vfe are left to
    the caller."""
    zero = minval - minval
    M, F = ks.shape[0], ns.shape[0]
    for m in range(M):
        out[m] = scale * _expect(ll, ll_off[m], deps, dims, m, ks[m], q, s_off, idx, zero)
    for f in range(F):
        ent = zero
        ce = zero
        for a in range(s_off[f], s_off[f] + ns[f]):
            v = q[a]
            if v != zero:
                if with_entropy:
                    ent += v * np.log(v if v > minval else minval)
                p = prior[a]
                ce -= v * np.log(p if p > minval else minval)
        if with_entropy:
            out[M + f] = scale * ent
        out[M + F + f] = scale * ce if with_prior else zero


@inline
def _entropy_from_logits(logits, Q, ns, minval, out):
    """out[f] = sum_a q_a ln q_a for the posteriors Q (F, n_max) = softmax of ``logits`` (F, n_max) row by row: with
    a* the row's largest logit, ln q_a = logits_a - logits_a* + ln q_a* (q_a* = 1 / the softmax's sum), one log per
    factor instead of one per state. It differs from ln max(q_a, minval) only where q_a < minval, by less than
    q_a * ln(minval / q_a): beyond the tolerances."""
    zero = minval - minval
    for f in range(ns.shape[0]):
        top = 0
        for a in range(1, ns[f]):
            if logits[f, a] > logits[f, top]:
                top = a
        base = np.log(Q[f, top]) - logits[f, top]
        ent = zero
        for a in range(ns[f]):
            v = Q[f, a]
            if v != zero:
                ent += v * (logits[f, a] + base)
        out[f] = ent


@inline
def _vfe_into(M, F, out):
    """out[-1] = sum of the complexity terms - sum of the accuracies."""
    v = out[0] - out[0]
    for j in range(M, M + 3 * F):
        v += out[j]
    for m in range(M):
        v -= out[m]
    out[M + 3 * F] = v


@njit
def surprise_rows(log_A, A_clip, a_off, ll_off, deps, dims, ks, o_off, s_off, obs, prior, minval, out):
    """obs (b, O), prior (b, S) -> out (b, M): each reading's surprise under its row's prior predictive; A_clip:
    log A's likelihoods clipped at minval (exp of it), same layout."""
    mode = flush_subnormals()
    nobs = _nobs(o_off)
    L = ll_off[-1]
    ll, e = np.zeros(L, obs.dtype), np.zeros(L, obs.dtype)
    idx = np.zeros(max(deps.shape[1], 1), np.int64)
    shared = log_A.shape[0] == 1
    for i in range(obs.shape[0]):
        ab = 0 if shared else i
        log_likelihoods(log_A, ab, a_off, ll_off, obs[i], o_off, nobs, ll, 0)
        _surprise_into(A_clip[ab], a_off, ll, ll_off, deps, dims, ks, obs[i], o_off, prior[i], s_off, e, idx, minval,
                       out[i])
    restore_fp_mode(mode)


@njit
def free_energy_rows(log_A, a_off, ll_off, deps, dims, ks, ns, o_off, s_off, log_B, b_off, bdeps, bdims, bks,
                     ncontrols, has_B, obs, prior, posterior, actions, valid_steps, minval, out):
    """obs (b, T, O), prior (b, S), posterior (b, T, S), actions (b, T-1, F) -> out (b, T, M + 3 F + 1): the free-energy
    terms of each row's posterior (T = 1 and has_B False: one FPI step). valid_steps < 0: every step is real."""
    mode = flush_subnormals()
    zero = minval - minval
    one = minval / minval
    M, F = ks.shape[0], ns.shape[0]
    T = obs.shape[1]
    nobs = _nobs(o_off)
    ll = np.zeros(ll_off[-1], obs.dtype)
    idx = np.zeros(max(deps.shape[1], bdeps.shape[1], 1), np.int64)
    obs_valid = np.ones(T, np.bool_)
    start = np.ones(T, np.bool_)
    trans_ok = np.zeros(T, np.bool_)  # trans_ok[t]: the transition t-1 -> t is valid and t is no start
    shared = log_A.shape[0] == 1
    for i in range(obs.shape[0]):
        ab = 0 if shared else i
        kk = T if valid_steps < 0 else min(max(valid_steps, 1), T)
        for t in range(T):
            obs_valid[t] = t >= T - kk
        for t in range(T):
            valid_in = False
            if t > 0 and obs_valid[t - 1] and obs_valid[t]:
                valid_in = True
                for f in range(F):
                    if actions[i, t - 1, f] < 0:
                        valid_in = False
            # a model without B: the prior term at every real step (pymdp's rule)
            start[t] = obs_valid[t] and (not has_B or not valid_in)
            trans_ok[t] = has_B and valid_in and not start[t]
        for t in range(T):
            row = out[i, t]
            scale = one if obs_valid[t] else zero
            log_likelihoods(log_A, ab, a_off, ll_off, obs[i, t], o_off, nobs, ll, 0)
            _step_into(ll, ll_off, deps, dims, ks, ns, s_off, posterior[i, t], prior[i], start[t], True, scale, idx,
                       minval, row)
            for f in range(F):
                ce = zero
                if trans_ok[t]:
                    n_f = ns[f]
                    u = max(actions[i, t - 1, f], 0)
                    P = (b_off[f + 1] - b_off[f]) // ((ncontrols[f] + 1) * n_f)
                    lb = log_B[ab]
                    for a in range(n_f):
                        qa = posterior[i, t, s_off[f] + a]
                        if qa != zero:
                            ce -= qa * _expect(lb, b_off[f] + (u * n_f + a) * P, bdeps, bdims, f, bks[f],
                                               posterior[i, t - 1], s_off, idx, zero)
                row[M + 2 * F + f] = ce
            _vfe_into(M, F, row)
    restore_fp_mode(mode)


@inline
def _tick_evidence_into(ints, log_A, B, A_clip, obs, prior, num_iter, minval, action, gates, out):
    """b agents' FPI ticks with their evidence (see ``fpi_tick_evidence_batched``), actions unchecked."""
    a_off, ll_off, deps, dims, ks, ns, o_off, s_off, b_off, bdeps, bdims, bks, ncontrols = _index(ints)
    F, n_max, L, M = ns.shape[0], _n_max(ns), ll_off[-1], ks.shape[0]
    half_max, w_max = scratch_sizes(ll_off, dims, ks)
    FN = F * n_max
    O, S = obs.shape[1], prior.shape[1]
    w = np.zeros(2 * L + 2 * half_max + w_max + 4 * FN + n_max + O, prior.dtype)
    iw = np.zeros(M + deps.shape[1] + max(bdeps.shape[1], 1), np.int64)
    nobs = _nobs_into(o_off, iw[:M])
    o = L + 2 * half_max + w_max
    ll, dbuf, wv = w[:L], w[L:L + 2 * half_max].reshape(2, half_max), w[L + 2 * half_max:o]
    c, x, Q = w[o:o + FN].reshape(F, n_max), w[o + FN:o + 2 * FN].reshape(F, n_max), w[o + 2 * FN:o + 3 * FN].reshape(F, n_max)
    Qp, tmp = w[o + 3 * FN:o + 4 * FN].reshape(F, n_max), w[o + 4 * FN:o + 4 * FN + n_max].reshape(1, n_max)
    e = w[o + 4 * FN + n_max:o + 4 * FN + n_max + L]
    kept = w[o + 4 * FN + n_max + L:].reshape(1, O)
    idx, idx_b = iw[M:M + deps.shape[1]], iw[M + deps.shape[1]:]
    shared = log_A.shape[0] == 1
    zero = minval - minval
    one = minval / minval  # 0 and 1 in the kernel's dtype (a literal would promote float32 to float64)
    mode = flush_subnormals()
    for i in range(obs.shape[0]):
        ab = 0 if shared else i
        q, nxt, row = out[i, :S], out[i, S:2 * S], out[i, 2 * S:]
        log_likelihoods(log_A, ab, a_off, ll_off, obs[i], o_off, nobs, ll, 0)
        _surprise_into(A_clip[ab], a_off, ll, ll_off, deps, dims, ks, obs[i], o_off, prior[i], s_off, e, idx, minval,
                       row[:M])
        for m in range(M):
            refused = row[m] > gates[m]
            for y in range(o_off[m], o_off[m + 1]):
                kept[0, y] = zero if refused else obs[i, y]
        # _fpi_into computes the kept readings' log likelihoods into ll, which the accuracy then reads
        _fpi_into(log_A[ab:ab + 1], a_off, ll_off, deps, dims, ks, ns, o_off, s_off, kept, prior[i:i + 1],
                  num_iter, minval, out[i:i + 1, :S], nobs, idx, ll, dbuf, wv, c, x, Q)
        _predict_into(B, ab, b_off, bdeps, bdims, bks, ncontrols, ns, s_off, q, action[i], nxt, Qp, tmp, idx_b)
        terms = row[M:]
        _step_into(ll, ll_off, deps, dims, ks, ns, s_off, q, prior[i], True, False, one, idx, minval, terms)
        # the entropy from the last softmax's logits, which _fpi_into leaves in x (several factors: x = c + the
        # messages of the last iteration) or c (one factor: pymdp's one pass, softmax(c))
        _entropy_from_logits(x if F > 1 else c, Q, ns, minval, terms[M:M + F])
        for f in range(F):
            terms[M + 2 * F + f] = zero
        _vfe_into(M, F, terms)
    restore_fp_mode(mode)


@njit
def fpi_tick_evidence_batched(ints, log_A, B, A_clip, obs, prior, num_iter, minval, action, gates, out):
    """b agents' FPI ticks with their evidence: obs (b, O), prior (b, S), action (b, F) int32, gates (M,) ->
    out (b, 2 S + M + M + 3 F + 1): the beliefs and the next prior (``tick.fpi_tick_batched``'s), each reading's
    surprise under the prior, then the beliefs' free-energy terms. A reading whose surprise is above its gate
    (``surprise > gates[m]``; +inf: no gate) is left out of the tick (no evidence) and of the accuracy.
    The arguments: ``schema.TickEvidenceAgentsArgs``. Returns -1, or the first agent whose action holds a control
    outside [0, num_controls) (then nothing is computed)."""
    ns, ncontrols = _ints1(ints, NS), _ints1(ints, NCONTROLS)
    for i in range(obs.shape[0]):
        for f in range(ns.shape[0]):
            if action[i, f] < 0 or action[i, f] >= ncontrols[f]:
                return i
    _tick_evidence_into(ints, log_A, B, A_clip, obs, prior, num_iter, minval, action, gates, out)
    return -1


def fpi_tick_evidence_batched_entry(dtype):
    """``fpi_tick_evidence_batched``'s compiled entry point for ``dtype``: ints (n,) int64, log_A, B and A 2-D, obs
    and prior 2-D of ``dtype``, action 2-D int32, gates 1-D and out 2-D of ``dtype``, all C-contiguous; num_iter int,
    minval ``dtype``."""
    f = numba.from_dtype(np.dtype(dtype))
    arr = lambda t, nd: numba.types.Array(t, nd, "C")  # noqa: E731
    return fpi_tick_evidence_batched.compile((arr(numba.int64, 1), arr(f, 2), arr(f, 2), arr(f, 2), arr(f, 2), arr(f, 2),
                                              numba.types.int64, f, arr(numba.int32, 2), arr(f, 1), arr(f, 2)))
