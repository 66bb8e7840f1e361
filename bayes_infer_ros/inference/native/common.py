"""What every fused_numba kernel module shares: the decorators, and small @inline helpers over the padded
per-state arrays (optional: needs numba; imported only when the variant is built).

Kernels are decorated without ``cache=True``: the loader (``engine._kernels``) gives each its cache in a folder
that can be written, or none (``..kernel_cache``), so an unwritable cache never stops the import.
Arrays are float32 or float64 (each dtype compiles once); int arrays are int64, except the steps' actions
(int32, as the node's controls).

Per-state arrays are (rows, n_max), row ``t * F + f`` (t = 0 for FPI); ``ll`` holds every step's log likelihood,
step t at ``t * L``.

The iteration loops call no helper inside a loop over steps or factors: helpers loop over all steps themselves
(``add_messages``, ``softmax_rows``), the one-dependency transition messages are written out in ``sequence``, and
only factors with several B-dependencies call ``forward`` / ``backward``. Long loops index views by the loop
counter; inside the iterations offsets are written ``max(off, 0)`` (a no-op on valid offsets). Why (numba's
reference counts, index wrapping), with the measurements: TUNING.md beside this file.
"""
import numba
import numpy as np

njit = numba.njit(nogil=True)
# Helpers are inlined at numba's IR level: a plain call costs more than a small helper's work. Inlining keeps the
# reference counts of their array arguments (see above), so they are called outside the kernels' inner loops.
inline = numba.njit(nogil=True, inline="always")


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
