"""numba kernels of ``fused_numba`` (see ``native.py``): imported only when that variant is built.

Module-level functions so that numba's on-disk cache (``cache=True``) can keep them across processes.
Arrays are float32 or float64 (each dtype compiles once); int arrays are int64.
"""
import numba
import numpy as np

njit = numba.njit(cache=True, nogil=True)
# Helpers called in the kernels' inner loops are inlined at numba's IR level: a plain call passes every array as a
# reference-counted struct (an atomic increment and decrement each), which cost more than the helpers' work.
inline = numba.njit(cache=True, nogil=True, inline="always")


@inline
def _nobs(o_off):
    out = np.empty(o_off.shape[0] - 1, np.int64)
    for m in range(out.shape[0]):
        out[m] = o_off[m + 1] - o_off[m]
    return out


@inline
def log_likelihoods(log_A, a_off, ll_off, o, o_off, nobs, ll):
    """ll[ll_off[m] + p] = sum_o o[o_off[m] + o] * log_A[a_off[m] + o * P_m + p]."""
    M = nobs.shape[0]
    for m in range(M):
        P = ll_off[m + 1] - ll_off[m]
        for p in range(P):
            ll[ll_off[m] + p] = 0.0
        for k in range(nobs[m]):
            w = o[o_off[m] + k]
            if w == 0.0:
                continue
            base = a_off[m] + k * P
            for p in range(P):
                ll[ll_off[m] + p] += w * log_A[base + p]


@inline
def work_size(ll_off, dims, ks):
    """Scratch elements ``add_messages`` needs: per modality with three or more dependencies, two contraction
    buffers of P / n_0 and the Kronecker products of the trailing posteriors (sum over j of n_{j+1} ... n_{k-1})."""
    need = 0
    for m in range(ks.shape[0]):
        k = ks[m]
        if k < 3:
            continue
        P = ll_off[m + 1] - ll_off[m]
        size = 2 * (P // dims[m, 0])
        rest = 1
        for j in range(k - 1, -1, -1):
            size += rest
            rest *= dims[m, j]
        need = max(need, size)
    return need


@inline
def add_messages(ll, ll_off, deps, dims, ks, Q, out, unary, idx, work, zero):
    """out[f, :] += messages of every modality with ks[m] == 1 (unary=True) or ks[m] >= 2 (False).

    A modality with k >= 3 dependencies sends factor j the contraction of its log likelihood L (n_0, ..., n_{k-1})
    with every other factor's posterior. With G_0 = L and G_{j+1} = q_j . G_j (the leading axis contracted),
    message j is G_j (n_j, rest) . (q_{j+1} x ... x q_{k-1}): about 2 P multiply-adds for all k messages, over
    contiguous rows. idx (K,) int64 and work (``work_size``,): scratch allocated once by the caller."""
    M = ks.shape[0]
    for m in range(M):
        k = ks[m]
        base = ll_off[m]
        if k == 1:
            if unary:
                f = deps[m, 0]
                for a in range(dims[m, 0]):
                    out[f, a] += ll[base + a]
            continue
        if unary:
            continue
        if k == 2:  # both directions of one (n_f, n_g) block in a single pass
            f, g = deps[m, 0], deps[m, 1]
            nf, ng = dims[m, 0], dims[m, 1]
            for a in range(nf):
                row = base + a * ng
                qa = Q[f, a]
                acc = zero
                for b in range(ng):
                    v = ll[row + b]
                    acc += v * Q[g, b]
                    out[g, b] += v * qa
                out[f, a] += acc
            continue
        P = ll_off[m + 1] - base
        half = P // dims[m, 0]
        # w_j = q_{j+1} x ... x q_{k-1} (w_{k-1} = [1]) at work[2 half + idx[j]:], built back to front
        wb = work[2 * half:]
        wb[0] = 1.0
        idx[k - 1] = 0
        length = 1
        for j in range(k - 2, -1, -1):
            g, ng = deps[m, j + 1], dims[m, j + 1]
            prev = idx[j + 1]
            start = prev + length
            for a in range(ng):
                qa = Q[g, a]
                row = start + a * length
                for r in range(length):
                    wb[row + r] = qa * wb[prev + r]
            idx[j] = start
            length *= ng
        G = ll[base:base + P]
        size = P
        for j in range(k):
            f, nf = deps[m, j], dims[m, j]
            rest = size // nf
            w0 = idx[j]
            for a in range(nf):
                row = a * rest
                acc = 0.0  # float64: a long sum (rest = P / n_j terms)
                for r in range(rest):
                    acc += G[row + r] * wb[w0 + r]
                out[f, a] += acc
            if j < k - 1:
                dst = work[:half] if j % 2 == 0 else work[half:2 * half]
                for r in range(rest):
                    dst[r] = 0.0
                for a in range(nf):
                    qa = Q[f, a]
                    row = a * rest
                    for r in range(rest):
                        dst[r] += qa * G[row + r]
                G = dst
                size = rest


@inline
def softmax_rows(x, ns, out, zero):
    """out[f, :n_f] = softmax(x[f, :n_f]); padding stays 0."""
    for f in range(ns.shape[0]):
        mx = x[f, 0]
        for a in range(ns[f]):
            if x[f, a] > mx:
                mx = x[f, a]
        tot = zero
        for a in range(ns[f]):
            e = np.exp(x[f, a] - mx)
            out[f, a] = e
            tot += e
        for a in range(ns[f]):
            out[f, a] = out[f, a] / tot


@inline
def log_stable_pad(p, s_off, ns, n_max, minval, out):
    for f in range(ns.shape[0]):
        for a in range(n_max):
            out[f, a] = 0.0
        for a in range(ns[f]):
            v = p[s_off[f] + a]
            out[f, a] = np.log(v if v > minval else minval)


@inline
def unpad(Q, s_off, ns, out):
    for f in range(ns.shape[0]):
        for a in range(ns[f]):
            out[s_off[f] + a] = Q[f, a]


@njit
def fpi(log_A, a_off, ll_off, deps, dims, ks, ns, o_off, s_off, obs, prior, num_iter, minval, out):
    """obs (b, O), prior (b, S) -> out (b, S)."""
    zero = minval - minval  # 0 in the kernel's dtype (a float literal would promote float32 to float64)
    F = ns.shape[0]
    n_max = 0
    for f in range(F):
        n_max = max(n_max, ns[f])
    nobs = _nobs(o_off)
    K = deps.shape[1]
    idx = np.zeros(K, np.int64)
    work = np.zeros(work_size(ll_off, dims, ks), obs.dtype)
    ll = np.zeros(ll_off[-1], obs.dtype)
    c = np.zeros((F, n_max), obs.dtype)
    x = np.zeros((F, n_max), obs.dtype)
    Q = np.zeros((F, n_max), obs.dtype)
    for b in range(obs.shape[0]):
        log_likelihoods(log_A[b], a_off, ll_off, obs[b], o_off, nobs, ll)
        log_stable_pad(prior[b], s_off, ns, n_max, minval, c)
        add_messages(ll, ll_off, deps, dims, ks, Q, c, True, idx, work, zero)
        if F == 1:
            softmax_rows(c, ns, Q, zero)
        else:
            for f in range(F):
                for a in range(n_max):
                    Q[f, a] = 1.0 / ns[f] if a < ns[f] else 0.0
            for _ in range(num_iter):
                x[:, :] = c
                add_messages(ll, ll_off, deps, dims, ks, Q, x, False, idx, work, zero)
                softmax_rows(x, ns, Q, zero)
        unpad(Q, s_off, ns, out[b])


@inline
def _step_odometer(idx, dims_row, k):
    """Advance a row-major multi-index (the last position varies fastest)."""
    j = k - 1
    while j >= 0:
        idx[j] += 1
        if idx[j] < dims_row[j]:
            return
        idx[j] = 0
        j -= 1


@inline
def forward(Bflat, b_base, n_f, P, bdeps_row, bdims_row, k, Qt, out, take_log, minval, idx):
    """out[a] = sum_p Bflat[b_base + a * P + p] * prod_j Qt[deps_j, idx_j]  (log_stable of it when take_log).

    Bflat holds log B for VMP (linear message) or B for MMP and the prediction. idx: (>= k,) int64 scratch."""
    for j in range(k):
        idx[j] = 0
    for a in range(n_f):
        out[a] = 0.0
    for p in range(P):
        w = Qt[bdeps_row[0], idx[0]]
        for j in range(1, k):
            w *= Qt[bdeps_row[j], idx[j]]
        for a in range(n_f):
            out[a] += Bflat[b_base + a * P + p] * w
        _step_odometer(idx, bdims_row, k)
    if take_log:
        for a in range(n_f):
            out[a] = np.log(out[a] if out[a] > minval else minval)


@inline
def backward(Bflat, b_base, n_i, P, bdeps_row, bdims_row, k, Qt, Qnext_i, n_max, kind_vmp, minval, half, past_t,
             bl, idx, vals, prefix, suffix):
    """Factor i's backward messages to each of its dependencies, added into past_t (F, n_max).

    bl (K, n_i, n_max) scratch: bl[l, a, x] = sum over the other dependencies of B_i[a, ..., x, ...] times their
    posteriors (pymdp ``_marginalise_others``). VMP (Bflat = log B): past[d_l, x] += sum_a q_next[a] bl[l, a, x].
    MMP (Bflat = B): each row normalised over x, past[d_l, x] += 0.5 log_stable(sum_a q_next[a] bl_norm[a, x]).
    idx (K,) int64, vals / prefix / suffix (K + 1,): scratch allocated once by the caller."""
    for j in range(k):
        idx[j] = 0
    for l in range(k):
        for a in range(n_i):
            for x in range(n_max):
                bl[l, a, x] = 0.0
    for p in range(P):
        prefix[0] = 1.0
        for j in range(k):
            vals[j] = Qt[bdeps_row[j], idx[j]]
            prefix[j + 1] = prefix[j] * vals[j]
        suffix[k] = 1.0
        for j in range(k - 1, -1, -1):
            suffix[j] = suffix[j + 1] * vals[j]
        for l in range(k):
            w = prefix[l] * suffix[l + 1]
            for a in range(n_i):
                bl[l, a, idx[l]] += Bflat[b_base + a * P + p] * w
        _step_odometer(idx, bdims_row, k)
    for l in range(k):
        f = bdeps_row[l]
        n_f = bdims_row[l]
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
                acc += Qnext_i[a] * bl[l, a, x]
            if kind_vmp:
                past_t[f, x] += acc
            else:
                past_t[f, x] += half * np.log(acc if acc > minval else minval)


@njit
def sequence(kind_vmp, log_A, a_off, ll_off, deps, dims, ks, ns, o_off, s_off, B, log_B, b_off, bdeps, bdims, bks,
             ncontrols, has_B, obs, prior, actions, valid_steps, num_iter, tau, minval, out):
    """obs (b, T, O), prior (b, S), actions (b, T-1, F) -> out (b, T, S). valid_steps < 0: no masks.

    B / log_B (b, total): factor f's transitions at b_off[f], laid out (u_f + 1, n_f, P_f) with the neutral
    transition (1 / n_f) as control u_f, where a negative action points."""
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
    work = np.zeros(work_size(ll_off, dims, ks), obs.dtype)
    ll = np.zeros((T, ll_off[-1]), obs.dtype)
    c = np.zeros((T, F, n_max), obs.dtype)
    Q = np.zeros((T, F, n_max), obs.dtype)
    lnq = np.zeros((F, n_max), obs.dtype)
    x = np.zeros((F, n_max), obs.dtype)
    fut = np.zeros((T, F, n_max), obs.dtype)
    past = np.zeros((T, F, n_max), obs.dtype)
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
            log_likelihoods(log_A[b], a_off, ll_off, obs[b, t], o_off, nobs, ll[t])
            if not obs_valid[t]:
                ll[t, :] = 0.0
            c[t, :, :] = 0.0
            add_messages(ll[t], ll_off, deps, dims, ks, Q[t], c[t], True, idx, work, zero)
        log_stable_pad(prior[b], s_off, ns, n_max, minval, ln_prior)
        for t in range(T):
            for f in range(F):
                for a in range(n_max):
                    Q[t, f, a] = 1.0 / ns[f] if a < ns[f] else 0.0
        src = log_B[b] if kind_vmp else B[b]
        for _ in range(num_iter):
            fut[:, :, :] = 0.0
            past[:, :, :] = 0.0
            for t in range(T):
                for f in range(F):
                    if not has_B:
                        if not kind_vmp:
                            for a in range(ns[f]):
                                fut[t, f, a] = ln_prior[f, a]
                        continue
                    if t == 0 or not trans_valid[t - 1]:
                        for a in range(ns[f]):
                            fut[t, f, a] = ln_prior[f, a]
                    else:
                        u = actions[b, t - 1, f]
                        u = ncontrols[f] if u < 0 else u
                        P = (b_off[f + 1] - b_off[f]) // ((ncontrols[f] + 1) * ns[f])
                        forward(src, b_off[f] + u * ns[f] * P, ns[f], P, bdeps[f], bdims[f], bks[f], Q[t - 1],
                                fut[t, f], not kind_vmp, minval, idx)
                    if not kind_vmp and t < T - 1 and trans_valid[t]:
                        for a in range(ns[f]):
                            fut[t, f, a] *= half
                if has_B and t < T - 1 and trans_valid[t]:
                    for i in range(F):
                        u = actions[b, t, i]
                        u = ncontrols[i] if u < 0 else u
                        P = (b_off[i + 1] - b_off[i]) // ((ncontrols[i] + 1) * ns[i])
                        backward(src, b_off[i] + u * ns[i] * P, ns[i], P, bdeps[i], bdims[i], bks[i], Q[t],
                                 Q[t + 1, i], n_max, kind_vmp, minval, half, past[t], bl, idx, vals, prefix, suffix)
            for t in range(T):
                x[:, :] = c[t]
                add_messages(ll[t], ll_off, deps, dims, ks, Q[t], x, False, idx, work, zero)
                for f in range(F):
                    nf = ns[f]
                    for a in range(nf):
                        q = Q[t, f, a]
                        lq = np.log(q if q > minval else minval)
                        tmp[a] = lq + tau * (x[f, a] - lq + past[t, f, a] + fut[t, f, a])
                    mean = zero
                    for a in range(nf):
                        mean += tmp[a]
                    mean = mean / n_float[f]
                    for a in range(nf):
                        lnq[f, a] = tmp[a] - mean
                softmax_rows(lnq, ns, Q[t], zero)
        for t in range(T):
            unpad(Q[t], s_off, ns, out[b, t])


@njit
def predict(B, b_index, b_off, bdeps, bdims, bks, ncontrols, ns, s_off, q, action, out):
    """pymdp compute_expected_state: out_f = sum over B_f[:, deps..., action_f] times the deps' posteriors."""
    F = ns.shape[0]
    n_max = 0
    for f in range(F):
        n_max = max(n_max, ns[f])
    Qp = np.zeros((F, n_max), q.dtype)
    for f in range(F):
        for a in range(ns[f]):
            Qp[f, a] = q[s_off[f] + a]
    tmp = np.zeros(n_max, q.dtype)
    idx = np.zeros(max(bdeps.shape[1], 1), np.int64)
    for f in range(F):
        u = action[f]
        P = (b_off[f + 1] - b_off[f]) // ((ncontrols[f] + 1) * ns[f])
        forward(B[b_index], b_off[f] + u * ns[f] * P, ns[f], P, bdeps[f], bdims[f], bks[f], Qp, tmp, False, 0.0, idx)
        for a in range(ns[f]):
            out[s_off[f] + a] = tmp[a]
