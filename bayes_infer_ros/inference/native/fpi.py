"""fused_numba's FPI kernel (optional: needs numba): ``fpi`` is the entry point, ``_fpi_into`` the update on
scratch the caller gives (the node's tick reuses it).
"""
import numba
import numpy as np

from .common import _n_max, _nobs, inline, log_stable_pad, njit, scratch_sizes, softmax_rows, unpad
from .contractions import add_messages, log_likelihoods
from .fp_mode import flush_subnormals, restore_fp_mode

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


# The entry point sets the floating-point mode around a call of its kernel (not inside it: TUNING.md).
@njit
def fpi(log_A, a_off, ll_off, deps, dims, ks, ns, o_off, s_off, obs, prior, num_iter, minval, out):
    """obs (b, O), prior (b, S) -> out (b, S) (arguments: ``schema.FpiArgs``)."""
    mode = flush_subnormals()
    _fpi(log_A, a_off, ll_off, deps, dims, ks, ns, o_off, s_off, obs, prior, num_iter, minval, out)
    restore_fp_mode(mode)


@njit
def fpi_one(log_A, a_off, ll_off, deps, dims, ks, ns, o_off, s_off, obs, prior, num_iter, minval, out):
    """``fpi`` of one row given without its row axis: obs (O,), prior (S,) -> out (S,) (a call of the list API
    spends no view on the axis)."""
    fpi(log_A, a_off, ll_off, deps, dims, ks, ns, o_off, s_off, obs.reshape(1, obs.shape[0]),
        prior.reshape(1, prior.shape[0]), num_iter, minval, out.reshape(1, out.shape[0]))


def fpi_entry(dtype, rows=True):
    """``fpi``'s compiled entry point for ``dtype`` (float32 or float64), or ``fpi_one``'s (``rows`` False): a call
    without the dispatcher's type resolution. The caller passes exactly these types, all C-contiguous: log_A 2-D,
    obs, prior and out 2-D (``fpi_one``: 1-D) of ``dtype``, the index arrays int64 (``deps`` and ``dims`` 2-D, the
    others 1-D), num_iter int, minval ``dtype``."""
    f = numba.from_dtype(np.dtype(dtype))
    arr = lambda t, nd: numba.types.Array(t, nd, "C")  # noqa: E731
    i1, i2, x = arr(numba.int64, 1), arr(numba.int64, 2), arr(f, 2 if rows else 1)
    return (fpi if rows else fpi_one).compile((arr(f, 2), i1, i1, i2, i2, i1, i1, i1, i1, x, x, numba.types.int64, f,
                                               x))


@njit
def fpi_parts(parts, offsets, log_A, a_off, ll_off, deps, dims, ks, ns, o_off, s_off, num_iter, minval, out):
    """pymdp's list call of one row in one call: parts (a tuple of M + F 1-D arrays, the observations then the
    prior), offsets (M+F+1,) int64 -> out (S,). It gathers the parts into one buffer and runs ``fpi_one``; it returns
    False, with ``out`` untouched, when part i's length is not offsets[i+1] - offsets[i]."""
    n = len(parts)
    both = np.empty(offsets[n], out.dtype)
    for i in range(n):
        x = parts[i]
        start = offsets[i]
        if x.shape[0] != offsets[i + 1] - start:
            return False
        for j in range(x.shape[0]):
            both[start + j] = x[j]
    O = o_off[-1]
    fpi_one(log_A, a_off, ll_off, deps, dims, ks, ns, o_off, s_off, both[:O], both[O:], num_iter, minval, out)
    return True


def parts_entry(dtype, count):
    """``fpi_parts``' compiled entry point for a tuple of ``count`` 1-D arrays of ``dtype`` (any strides). It unboxes
    without checking: the caller passes a tuple of exactly ``count`` numpy arrays (ndarray itself, not a subclass),
    each 1-D of exactly ``dtype``, and the model arguments as ``fpi_entry``'s (out 1-D). Compiling one takes about a
    second (``fpi_one`` is compiled into it); the disk cache keeps it."""
    f = numba.from_dtype(np.dtype(dtype))
    arr = lambda t, nd, layout="C": numba.types.Array(t, nd, layout)  # noqa: E731
    i1, i2 = arr(numba.int64, 1), arr(numba.int64, 2)
    return fpi_parts.compile((numba.types.UniTuple(arr(f, 1, "A"), count), i1, arr(f, 2), i1, i1, i2, i2, i1, i1,
                              i1, i1, numba.types.int64, f, arr(f, 1)))
