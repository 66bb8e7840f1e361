"""The likelihood side of every fused_numba kernel (optional: needs numba): each modality's log likelihood of an
observation, and the messages it sends the factors it depends on (``add_messages``).

A modality with k >= 3 dependencies and ``LONG_CONTRACTION`` or more log-likelihood elements contracts in
``_contract_long``, compiled with ``fastmath={"reassoc"}`` (its sums stay float64; the threshold and why: TUNING.md
beside this file).
"""
import numba

from .common import inline

@inline
def log_likelihoods(log_A, ab, a_off, ll_off, o, o_off, nobs, ll, lb):
    """ll[lb + ll_off[m] + p] = sum_o o[o_off[m] + o] * log_A[ab, a_off[m] + o * P_m + p]."""
    M = nobs.shape[0]
    for m in range(M):
        P = ll_off[m + 1] - ll_off[m]
        dst = max(lb + ll_off[m], 0)
        for p in range(P):
            ll[dst + p] = 0.0
        for k in range(nobs[m]):
            w = o[o_off[m] + k]
            if w == 0.0:
                continue
            base = max(a_off[m] + k * P, 0)
            for p in range(P):
                ll[dst + p] += w * log_A[ab, base + p]


# Modalities with at least this many log-likelihood elements (and three or more dependencies) contract in
# ``_contract_long``, a separate function (the threshold: TUNING.md).
LONG_CONTRACTION = 256


@numba.njit(nogil=True, fastmath={"reassoc"})
def _contract_long(G, dbuf, wv, idx, deps, dims, m, k, qr, Q, out):
    """``add_messages``'s k >= 3 messages of modality m from its log likelihood G (P,), w_j at wv[idx[j]:]."""
    size = G.shape[0]
    for j in range(k):
        f, nf = qr + deps[m, j], dims[m, j]
        rest = size // nf
        w = wv[idx[j]:idx[j] + rest]
        for a in range(nf):
            g = G[a * rest:(a + 1) * rest]
            acc = 0.0  # float64: a long sum (rest = P / n_j terms)
            for r in range(rest):
                acc += g[r] * w[r]
            out[f, a] += acc
        if j < k - 1:
            dst = dbuf[j % 2, :rest]
            for r in range(rest):
                dst[r] = 0.0
            for a in range(nf):
                qa = Q[f, a]
                g = G[a * rest:(a + 1) * rest]
                for r in range(rest):
                    dst[r] += qa * g[r]
            G = dst
            size = rest


@inline
def add_messages(ll, L, T, dbuf, wv, ll_off, deps, dims, ks, Q, out, unary, idx, zero):
    """For each step t < T, out[t F + f, :] += messages of every modality with ks[m] == 1 (unary=True) or
    ks[m] >= 2 (False), given the log likelihoods ll[t L:] and the posteriors Q[t F + f, :].

    A modality with k >= 3 dependencies sends factor j the contraction of its log likelihood L (n_0, ..., n_{k-1})
    with every other factor's posterior. With G_0 = L and G_{j+1} = q_j . G_j (the leading axis contracted),
    message j is G_j (n_j, rest) . (q_{j+1} x ... x q_{k-1}): about 2 P multiply-adds for all k messages, over
    contiguous rows. idx (K,) int64 scratch; dbuf (2, half_max) and wv (w_max,) scratch (``scratch_sizes``): G_1,
    G_2, ... alternate between dbuf's rows, w_j is at wv[idx[j]:]. All steps in one call: the loops
    stay in one function body (see the module docstring)."""
    M = ks.shape[0]
    F = out.shape[0] // T
    for t in range(T):
        qr = t * F
        for m in range(M):
            k = ks[m]
            base = t * L + ll_off[m]
            if k == 1:
                if unary:
                    f = qr + deps[m, 0]
                    for a in range(dims[m, 0]):
                        out[f, a] += ll[base + a]
                continue
            if unary:
                continue
            if k == 2:  # both directions of one (n_f, n_g) block in a single pass
                f, g = qr + deps[m, 0], qr + deps[m, 1]
                nf, ng = dims[m, 0], dims[m, 1]
                for a in range(nf):
                    row = max(base + a * ng, 0)
                    qa = Q[f, a]
                    acc = zero
                    for b in range(ng):
                        v = ll[row + b]
                        acc += v * Q[g, b]
                        out[g, b] += v * qa
                    out[f, a] += acc
                continue
            P = ll_off[m + 1] - ll_off[m]
            wv[0] = 1.0
            idx[k - 1] = 0
            length = 1
            for j in range(k - 2, -1, -1):
                g, ng = qr + deps[m, j + 1], dims[m, j + 1]
                prev = max(idx[j + 1], 0)
                start = prev + length
                for a in range(ng):
                    qa = Q[g, a]
                    row = max(start + a * length, 0)
                    for r in range(length):
                        wv[row + r] = qa * wv[prev + r]
                idx[j] = start
                length *= ng
            if P >= LONG_CONTRACTION:
                _contract_long(ll[base:base + P], dbuf, wv, idx, deps, dims, m, k, qr, Q, out)
                continue
            # j = 0 contracts L itself (ll at base); G_1, G_2, ... are dbuf[0], dbuf[1], dbuf[0], ...
            f, nf = qr + deps[m, 0], dims[m, 0]
            rest = P // nf
            w0 = max(idx[0], 0)
            for a in range(nf):
                row = max(base + a * rest, 0)
                acc = 0.0  # float64: a long sum (rest = P / n_j terms)
                for r in range(rest):
                    acc += ll[row + r] * wv[w0 + r]
                out[f, a] += acc
            for r in range(rest):
                dbuf[0, r] = 0.0
            for a in range(nf):
                qa = Q[f, a]
                row = max(base + a * rest, 0)
                for r in range(rest):
                    dbuf[0, r] += qa * ll[row + r]
            size = rest
            for j in range(1, k):
                s_in = (j - 1) % 2
                f, nf = qr + deps[m, j], dims[m, j]
                rest = size // nf
                w0 = max(idx[j], 0)
                for a in range(nf):
                    row = max(a * rest, 0)
                    acc = 0.0
                    for r in range(rest):
                        acc += dbuf[s_in, row + r] * wv[w0 + r]
                    out[f, a] += acc
                if j < k - 1:
                    s_out = 1 - s_in
                    for r in range(rest):
                        dbuf[s_out, r] = 0.0
                    for a in range(nf):
                        qa = Q[f, a]
                        row = max(a * rest, 0)
                        for r in range(rest):
                            dbuf[s_out, r] += qa * dbuf[s_in, row + r]
                    size = rest
