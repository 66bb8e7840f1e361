"""fused_numba's VMP / MMP kernel over a window of T steps (optional: needs numba): ``sequence`` is the entry
point, ``_sequence`` pymdp's ``update_marginals`` with ``get_vmp_messages`` / ``get_mmp_messages``.

The iteration's loops are written out in ``_sequence`` rather than in helpers (numba's reference counts: TUNING.md).
"""
import numba
import numpy as np

from .common import _nobs, log_stable_pad, njit, scratch_sizes, softmax_rows, unpad
from .contractions import add_messages, log_likelihoods
from .fp_mode import flush_subnormals, restore_fp_mode
from .transitions import backward, forward, normalise_rows

@njit
def _sequence(log_A, a_off, ll_off, deps, dims, ks, ns, o_off, s_off, B, log_B, b_off, bdeps, bdims, bks, ncontrols,
             has_B, kind_vmp, obs, prior, actions, valid_steps, num_iter, tau, minval, out):
    """obs (b, T, O), prior (b, S), actions (b, T-1, F) -> out (b, T, S) (arguments: ``schema.SequenceArgs``)."""
    F = ns.shape[0]
    n_max = 0
    for f in range(F):
        n_max = max(n_max, ns[f])
    KB = bdeps.shape[1]
    nb, T = obs.shape[0], obs.shape[1]
    nobs = _nobs(o_off)
    K = max(deps.shape[1], KB)
    idx, vals = np.zeros(K, np.int64), np.zeros(K + 1, obs.dtype)
    prefix, suffix = np.zeros(K + 1, obs.dtype), np.zeros(K + 1, obs.dtype)
    L = ll_off[-1]
    ll = np.zeros(T * L, obs.dtype)
    half_max, w_max = scratch_sizes(ll_off, dims, ks)
    dbuf, wv = np.zeros((2, half_max), obs.dtype), np.zeros(w_max, obs.dtype)
    c = np.zeros((T * F, n_max), obs.dtype)
    Q = np.zeros((T * F, n_max), obs.dtype)
    fut = np.zeros((T * F, n_max), obs.dtype)
    past = np.zeros((T * F, n_max), obs.dtype)
    lnq = np.zeros((T * F, n_max), obs.dtype)
    x = np.zeros((T * F, n_max), obs.dtype)
    ln_prior = np.zeros((F, n_max), obs.dtype)
    obs_valid = np.ones(T, np.bool_)
    trans_valid = np.ones(max(T - 1, 0), np.bool_)
    tmp = np.zeros(n_max, obs.dtype)
    n_float = ns.astype(obs.dtype)
    # 0, 1 and 0.5 in the kernel's dtype: a float literal would promote float32 arithmetic to float64
    zero = minval - minval
    one = minval / minval
    half = one / (one + one)
    bl = np.zeros((max(KB, 1), n_max, n_max), obs.dtype)
    # MMP, factors with one dependency: row-normalised B under each step's action, row t * F + f
    Bn = np.zeros((0 if kind_vmp else max(T - 1, 0) * F, n_max * n_max), obs.dtype)
    Bs = log_B if kind_vmp else B
    for b in range(nb):
        if valid_steps >= 0:
            kk = min(max(valid_steps, 1), T)
            for t in range(T):
                obs_valid[t] = t >= T - kk
            for t in range(T - 1):
                ok = obs_valid[t] and obs_valid[t + 1]
                for f in range(F):
                    if actions[b, t, f] < 0:
                        ok = False
                trans_valid[t] = ok
        for t in range(T):
            log_likelihoods(log_A, b, a_off, ll_off, obs[b, t], o_off, nobs, ll, t * L)
            if not obs_valid[t]:
                for p in range(L):
                    ll[t * L + p] = 0.0
        for r in range(T * F):
            for a in range(n_max):
                c[r, a] = 0.0
        add_messages(ll, L, T, dbuf, wv, ll_off, deps, dims, ks, Q, c, True, idx, zero)
        log_stable_pad(prior[b], s_off, ns, n_max, minval, ln_prior)
        for r in range(T * F):
            f = r % F
            for a in range(n_max):
                Q[r, a] = 1.0 / ns[f] if a < ns[f] else 0.0
        if has_B and not kind_vmp:
            for t in range(T - 1):
                if not trans_valid[t]:
                    continue
                for i in range(F):
                    if bks[i] == 1:
                        u = actions[b, t, i]
                        u = ncontrols[i] if u < 0 else u
                        n_f = bdims[i, 0]
                        normalise_rows(Bs, b, b_off[i] + u * ns[i] * n_f, ns[i], n_f, minval, Bn, t * F + i)
        # The iteration's loops are written out here, not in helpers: see the module docstring
        for _ in range(num_iter):
            for r in range(T * F):
                for a in range(n_max):
                    fut[r, a] = 0.0
                    past[r, a] = 0.0
            for t in range(T):
                for f in range(F):
                    r = t * F + f
                    nf = ns[f]
                    if not has_B:
                        if not kind_vmp:
                            for a in range(nf):
                                fut[r, a] = ln_prior[f, a]
                        continue
                    if t == 0 or not trans_valid[t - 1]:
                        for a in range(nf):
                            fut[r, a] = ln_prior[f, a]
                    else:
                        u = actions[b, t - 1, f]
                        u = ncontrols[f] if u < 0 else u
                        P = (b_off[f + 1] - b_off[f]) // ((ncontrols[f] + 1) * nf)
                        b_base = b_off[f] + u * nf * P
                        if bks[f] == 1:  # forward's one-dependency product, written out
                            g = (t - 1) * F + bdeps[f, 0]
                            for p in range(P):
                                w = Q[g, p]
                                for a in range(nf):
                                    fut[r, a] += Bs[b, b_base + a * P + p] * w
                            if not kind_vmp:
                                for a in range(nf):
                                    v = fut[r, a]
                                    fut[r, a] = np.log(v if v > minval else minval)
                        else:
                            forward(Bs, b, b_base, nf, P, bdeps, bdims, f, bks[f], Q, (t - 1) * F, fut, r,
                                    not kind_vmp, minval, idx)
                    if not kind_vmp and t < T - 1 and trans_valid[t]:
                        for a in range(nf):
                            fut[r, a] *= half
                if has_B and t < T - 1 and trans_valid[t]:
                    for i in range(F):
                        u = actions[b, t, i]
                        u = ncontrols[i] if u < 0 else u
                        qn = (t + 1) * F + i
                        n_i = ns[i]
                        if bks[i] == 1:  # backward_one, written out (bl is B itself; MMP: rows normalised)
                            d, n_d = t * F + bdeps[i, 0], bdims[i, 0]
                            for y in range(n_d):
                                tmp[y] = zero
                            if kind_vmp:
                                b_base = b_off[i] + u * n_i * n_d
                                for a in range(n_i):
                                    w = Q[qn, a]
                                    row = max(b_base + a * n_d, 0)
                                    for y in range(n_d):
                                        tmp[y] += w * Bs[b, row + y]
                                for y in range(n_d):
                                    past[d, y] += tmp[y]
                            else:
                                rn = t * F + i
                                for a in range(n_i):
                                    w = Q[qn, a]
                                    row = max(a * n_d, 0)
                                    for y in range(n_d):
                                        tmp[y] += w * Bn[rn, row + y]
                                for y in range(n_d):
                                    v = tmp[y]
                                    past[d, y] += half * np.log(v if v > minval else minval)
                            continue
                        P = (b_off[i + 1] - b_off[i]) // ((ncontrols[i] + 1) * n_i)
                        backward(Bs, b, b_off[i] + u * n_i * P, n_i, P, bdeps, bdims, i, bks[i], Q, t * F, qn,
                                 n_max, kind_vmp, minval, half, past, t * F, bl, idx, vals, prefix, suffix)
            for r in range(T * F):
                for a in range(n_max):
                    x[r, a] = c[r, a]
            add_messages(ll, L, T, dbuf, wv, ll_off, deps, dims, ks, Q, x, False, idx, zero)
            for r in range(T * F):
                f = r % F
                nf = ns[f]
                for a in range(nf):
                    q = Q[r, a]
                    lq = np.log(q if q > minval else minval)
                    tmp[a] = lq + tau * (x[r, a] - lq + past[r, a] + fut[r, a])
                mean = zero
                for a in range(nf):
                    mean += tmp[a]
                mean = mean / n_float[f]
                for a in range(nf):
                    lnq[r, a] = tmp[a] - mean
            softmax_rows(lnq, ns, Q, zero)
        for t in range(T):
            unpad(Q, t * F, s_off, ns, out[b, t])


# The entry point sets the floating-point mode around a call of its kernel (not inside it: TUNING.md).
@njit
def sequence(log_A, a_off, ll_off, deps, dims, ks, ns, o_off, s_off, B, log_B, b_off, bdeps, bdims, bks, ncontrols,
             has_B, kind_vmp, obs, prior, actions, valid_steps, num_iter, tau, minval, out):
    """VMP (kind_vmp) or MMP: obs (b, T, O), prior (b, S), actions (b, T-1, F) -> out (b, T, S)
    (``schema.SequenceArgs``)."""
    mode = flush_subnormals()
    _sequence(log_A, a_off, ll_off, deps, dims, ks, ns, o_off, s_off, B, log_B, b_off, bdeps, bdims, bks, ncontrols,
              has_B, kind_vmp, obs, prior, actions, valid_steps, num_iter, tau, minval, out)
    restore_fp_mode(mode)


def sequence_entry(args):
    """``sequence``'s compiled entry point for exactly the types of ``args`` (a call's arguments, in the form the
    engine always passes them: obs, prior, actions and out C-contiguous of fixed ranks and dtypes): a call without the
    dispatcher's type resolution. Compiles, or loads from the disk cache, that one specialisation."""
    return sequence.compile(tuple(numba.typeof(a) for a in args))
