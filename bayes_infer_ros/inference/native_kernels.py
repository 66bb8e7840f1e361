"""numba kernels of ``fused_numba`` (see ``native.py``): imported only when that variant is built.

Module-level functions so that numba's on-disk cache can keep them across processes. They are decorated without
``cache=True``: the loader (``native._kernels``) gives each its cache in a folder that can be written, or none
(``kernel_cache``), so an unwritable cache never stops the import.
Arrays are float32 or float64 (each dtype compiles once); int arrays are int64, except ``fpi_tick``'s action
(int32, as the node's controls).

Per-state arrays are (rows, n_max), row ``t * F + f`` (t = 0 for FPI); ``ll`` holds every step's log likelihood,
step t at ``t * L``.

The iteration loops call no helper inside a loop over steps or factors: helpers loop over all steps themselves
(``add_messages``, ``softmax_rows``), the one-dependency transition messages are written out in ``sequence``, and
only factors with several B-dependencies call ``forward`` / ``backward``. Long loops index views by the loop
counter; inside the iterations offsets are written ``max(off, 0)`` (a no-op on valid offsets); ``_contract_long``,
the contraction of modalities of ``LONG_CONTRACTION`` or more log-likelihood elements, is compiled with
``fastmath={"reassoc"}`` (its sums stay float64).

On x86-64 and AArch64 every kernel runs with subnormal floats flushed to zero (``flush_subnormals`` /
``restore_fp_mode``), the floating-point mode XLA:CPU, and so pymdp, runs its programs in.

Why each of these (numba's reference counts, index wrapping, subnormal slow paths), with the measurements:
``NATIVE_TUNING.md`` beside this file.
"""
import platform

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils
from numba.extending import intrinsic

njit = numba.njit(nogil=True)
# Helpers are inlined at numba's IR level: a plain call costs more than a small helper's work. Inlining keeps the
# reference counts of their array arguments (see above), so they are called outside the kernels' inner loops.
inline = numba.njit(nogil=True, inline="always")


_MACHINE = platform.machine().lower()
_X86 = _MACHINE in ("x86_64", "amd64", "i686", "i386")
_ARM64 = _MACHINE in ("aarch64", "arm64")
_MXCSR_FTZ_DAZ = 0x8040  # x86 MXCSR: flush-to-zero (bit 15), denormals-are-zero (bit 6)
_FPCR_FZ = 1 << 24  # AArch64 FPCR: flush-to-zero


def _mxcsr_slot(builder):
    slot = cgutils.alloca_once(builder, ir.IntType(32))
    return slot, builder.bitcast(slot, ir.IntType(8).as_pointer())


def _mxcsr_op(builder, name, ptr):
    fnty = ir.FunctionType(ir.VoidType(), [ptr.type])
    builder.call(cgutils.get_or_insert_function(builder.module, fnty, name), [ptr])


def _fpcr_read(builder):
    fnty = ir.FunctionType(ir.IntType(64), [])
    return builder.call(cgutils.get_or_insert_function(builder.module, fnty, "llvm.aarch64.get.fpcr"), [])


def _fpcr_write(builder, word):
    fnty = ir.FunctionType(ir.VoidType(), [ir.IntType(64)])
    builder.call(cgutils.get_or_insert_function(builder.module, fnty, "llvm.aarch64.set.fpcr"), [word])


@intrinsic
def flush_subnormals(typingctx):
    """Flush subnormal results (and, on x86, operands) to zero on this thread from here on; returns the previous
    floating-point control word for ``restore_fp_mode``. A no-op returning 0 on other architectures."""
    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        if _X86:
            slot, ptr = _mxcsr_slot(builder)
            _mxcsr_op(builder, "llvm.x86.sse.stmxcsr", ptr)
            old = builder.load(slot)
            builder.store(builder.or_(old, ir.Constant(old.type, _MXCSR_FTZ_DAZ)), slot)
            _mxcsr_op(builder, "llvm.x86.sse.ldmxcsr", ptr)
            return builder.zext(old, i64)
        if _ARM64:
            old = _fpcr_read(builder)
            _fpcr_write(builder, builder.or_(old, ir.Constant(i64, _FPCR_FZ)))
            return old
        return ir.Constant(i64, 0)
    return numba.types.int64(), codegen


@intrinsic
def restore_fp_mode(typingctx, word):
    """Put back the control word that ``flush_subnormals`` returned."""
    def codegen(context, builder, signature, args):
        if _X86:
            slot, ptr = _mxcsr_slot(builder)
            builder.store(builder.trunc(args[0], ir.IntType(32)), slot)
            _mxcsr_op(builder, "llvm.x86.sse.ldmxcsr", ptr)
        elif _ARM64:
            _fpcr_write(builder, args[0])
        return context.get_dummy_value()
    return numba.types.void(numba.types.int64), codegen


@inline
def _nobs_into(o_off, out):
    """out[m] = the number of observation levels of modality m (M,)."""
    for m in range(out.shape[0]):
        out[m] = o_off[m + 1] - o_off[m]
    return out


@inline
def _nobs(o_off):
    return _nobs_into(o_off, np.empty(o_off.shape[0] - 1, np.int64))


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


@inline
def scratch_sizes(ll_off, dims, ks):
    """Scratch ``add_messages`` needs for modalities with three or more dependencies: the contraction buffers'
    length (max of P / n_0) and the Kronecker products' (max of sum over j of n_{j+1} ... n_{k-1})."""
    half_max, w_max = 1, 1
    for m in range(ks.shape[0]):
        k = ks[m]
        if k < 3:
            continue
        P = ll_off[m + 1] - ll_off[m]
        half_max = max(half_max, P // dims[m, 0])
        size = 0
        rest = 1
        for j in range(k - 1, -1, -1):
            size += rest
            rest *= dims[m, j]
        w_max = max(w_max, size)
    return half_max, w_max


# Modalities with at least this many log-likelihood elements (and three or more dependencies) contract in
# ``_contract_long``, a separate function (the threshold: NATIVE_TUNING.md).
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


@inline
def softmax_rows(x, ns, out, zero):
    """out[r, :n_f] = softmax(x[r, :n_f]) for every row r = t F + f; padding stays as it is."""
    F = ns.shape[0]
    for r in range(x.shape[0]):
        n = ns[r % F]
        mx = x[r, 0]
        for a in range(n):
            if x[r, a] > mx:
                mx = x[r, a]
        tot = zero
        for a in range(n):
            e = np.exp(x[r, a] - mx)
            out[r, a] = e
            tot += e
        for a in range(n):
            out[r, a] = out[r, a] / tot


@inline
def log_stable_pad(p, s_off, ns, n_max, minval, out):
    for f in range(ns.shape[0]):
        for a in range(n_max):
            out[f, a] = 0.0
        for a in range(ns[f]):
            v = p[s_off[f] + a]
            out[f, a] = np.log(v if v > minval else minval)


@inline
def unpad(Q, qr, s_off, ns, out):
    for f in range(ns.shape[0]):
        for a in range(ns[f]):
            out[s_off[f] + a] = Q[qr + f, a]


@inline
def _n_max(ns):
    n_max = 0
    for f in range(ns.shape[0]):
        n_max = max(n_max, ns[f])
    return n_max


@njit
def _fpi(log_A, a_off, ll_off, deps, dims, ks, ns, o_off, s_off, obs, prior, num_iter, minval, out):
    """obs (b, O), prior (b, S) -> out (b, S)."""
    F, n_max = ns.shape[0], _n_max(ns)
    half_max, w_max = scratch_sizes(ll_off, dims, ks)
    ll = np.zeros(ll_off[-1], obs.dtype)
    dbuf, wv = np.zeros((2, half_max), obs.dtype), np.zeros(w_max, obs.dtype)
    _fpi_into(log_A, a_off, ll_off, deps, dims, ks, ns, o_off, s_off, obs, prior, num_iter, minval, out,
              _nobs(o_off), np.zeros(deps.shape[1], np.int64), ll, dbuf, wv, np.zeros((F, n_max), obs.dtype),
              np.zeros((F, n_max), obs.dtype), np.zeros((F, n_max), obs.dtype))


@inline
def _fpi_into(log_A, a_off, ll_off, deps, dims, ks, ns, o_off, s_off, obs, prior, num_iter, minval, out, nobs, idx, ll,
              dbuf, wv, c, x, Q):
    """``_fpi`` with its scratch given: nobs (M,), idx (K,) int64; ll (L,), dbuf (2, half_max), wv (w_max,), c, x
    and Q (F, n_max), all zero."""
    zero = minval - minval  # 0 in the kernel's dtype (a float literal would promote float32 to float64)
    F, n_max, L = ns.shape[0], c.shape[1], ll.shape[0]
    for b in range(obs.shape[0]):
        log_likelihoods(log_A, b, a_off, ll_off, obs[b], o_off, nobs, ll, 0)
        log_stable_pad(prior[b], s_off, ns, n_max, minval, c)
        add_messages(ll, L, 1, dbuf, wv, ll_off, deps, dims, ks, Q, c, True, idx, zero)
        if F == 1:
            softmax_rows(c, ns, Q, zero)
        else:
            for f in range(F):
                for a in range(n_max):
                    Q[f, a] = 1.0 / ns[f] if a < ns[f] else 0.0
            for _ in range(num_iter):
                for f in range(F):
                    for a in range(n_max):
                        x[f, a] = c[f, a]
                add_messages(ll, L, 1, dbuf, wv, ll_off, deps, dims, ks, Q, x, False, idx, zero)
                softmax_rows(x, ns, Q, zero)
        unpad(Q, 0, s_off, ns, out[b])


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
def _sequence(kind_vmp, log_A, a_off, ll_off, deps, dims, ks, ns, o_off, s_off, B, log_B, b_off, bdeps, bdims, bks,
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


@njit
def _predict(B, b_index, b_off, bdeps, bdims, bks, ncontrols, ns, s_off, q, action, out):
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


# The entry points. Each sets the floating-point mode around a call of its kernel (not inside it: NATIVE_TUNING.md).


@njit
def fpi(log_A, a_off, ll_off, deps, dims, ks, ns, o_off, s_off, obs, prior, num_iter, minval, out):
    """obs (b, O), prior (b, S) -> out (b, S)."""
    mode = flush_subnormals()
    _fpi(log_A, a_off, ll_off, deps, dims, ks, ns, o_off, s_off, obs, prior, num_iter, minval, out)
    restore_fp_mode(mode)


@njit
def sequence(kind_vmp, log_A, a_off, ll_off, deps, dims, ks, ns, o_off, s_off, B, log_B, b_off, bdeps, bdims, bks,
             ncontrols, has_B, obs, prior, actions, valid_steps, num_iter, tau, minval, out):
    """VMP (kind_vmp) or MMP: obs (b, T, O), prior (b, S), actions (b, T-1, F) -> out (b, T, S) (see ``_sequence``)."""
    mode = flush_subnormals()
    _sequence(kind_vmp, log_A, a_off, ll_off, deps, dims, ks, ns, o_off, s_off, B, log_B, b_off, bdeps, bdims, bks,
              ncontrols, has_B, obs, prior, actions, valid_steps, num_iter, tau, minval, out)
    restore_fp_mode(mode)


@njit
def predict(B, b_index, b_off, bdeps, bdims, bks, ncontrols, ns, s_off, q, action, out):
    """pymdp compute_expected_state: q (S,), action (F,) -> out (S,) (see ``_predict``)."""
    mode = flush_subnormals()
    _predict(B, b_index, b_off, bdeps, bdims, bks, ncontrols, ns, s_off, q, action, out)
    restore_fp_mode(mode)


# The node's FPI tick: the model's arrays packed in two (``pack_tick_model``), the scratch in one buffer, the results
# written into the caller's array (why: NATIVE_TUNING.md, "The node's tick").


def pack_tick_model(index_arrays, log_A, B):
    """(ints, floats) for ``fpi_tick``: ints = a header (offset, rows, cols) per index array, then the arrays
    (int64, row-major); floats = log A's and B's one batch row, concatenated (the split is ``log_A.shape[1]``)."""
    header, parts, offset = [], [], 3 * len(index_arrays)
    for a in index_arrays:
        a = np.asarray(a, np.int64)
        header += [offset, a.shape[0], a.shape[1] if a.ndim == 2 else 1]
        parts.append(a.ravel())
        offset += a.size
    ints = np.concatenate([np.asarray(header, np.int64)] + parts)
    return ints, np.ascontiguousarray(np.concatenate([log_A[0], B[0]]))


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
