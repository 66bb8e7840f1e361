"""fused_numba's policy kernel (optional: needs numba): pymdp 1.0.4's ``Agent.infer_policies`` and
``Agent.sample_action`` for b agents of one model in one call (``policy_rows``). The maths, the plan it reads and
the noise of stochastic selection: ``..policy`` and docs/policy.md.

The policies are walked as a tree of shared prefixes (``policy.PolicyTree``): node after node in depth-first
pre-order, each node's predicted marginals written over the rows of its level in a (T + 1) F row stack, so that a
prefix shared by many policies is rolled forward once and the scratch stays a few rows whatever the number of
policies. Between two siblings (the same parent, visited one after the other at their level) a factor whose
control is the same keeps its prediction, and a modality whose factors all kept theirs keeps its value
(``node_fresh``, found at build time): with a few controlled factors most of a node is reused. A node's value
(utility and state information gain of its step) is added to its parent's running sum; a leaf's sum is its
policies' neg_efe.

Each contraction is a dot product over the summed (joint) index, contiguous in memory (``Bc``: B with its
control axis first; ``AH``: A with the entropy of its columns as one more row), and the kernel is compiled with
``fastmath={"reassoc"}`` so that LLVM vectorises these sums (a modality on four factors of a generated model sums
144 terms per level of observation): the summation order differs from a plain loop's, and from pymdp's, at the
rounding level (the oracle tests hold it to the tolerance table).

Arguments (``PolicyArgs``; the plan's first, then the call's)
-------------------------------------------------------------
Shapes: M modalities, F factors, P policies of T steps, N nodes of the policy tree, K noise values per agent
(P in full mode, sum_f u_f in marginal mode). The plan's arrays come packed in two (a call passes few arguments:
each costs about 30 ns to unbox, and 34 of them were 1.1 us): ``ints`` and ``floats``.

ints : (3 (len(INT_FIELDS) + len(FLOAT_FIELDS)) + ...,) int64
    A header of 3 slots (offset, rows, columns) per array, the int arrays (``INT_FIELDS``, offsets into
    ``ints``) then the float arrays (``FLOAT_FIELDS``, offsets into ``floats``), then the int arrays row-major
    (``pack_plan``). The int arrays (K / KB: the most dependencies of a modality / of a factor's transition):

    - ns (F,), s_off (F + 1,): each factor's states and where they start in packed beliefs;
    - bdeps (F, KB), bdims (F, KB), bks (F,): the factors each factor's transition depends on (0 past
      ``bks[f]``), their sizes (1 past it), how many;
    - ncontrols (F,): u_f; bc_off (F + 1,): where factor f's transitions start in ``Bc``;
    - deps (M, K), dims (M, K), ks (M,): modality m's A-dependencies (-1 past ``ks[m]``), their sizes (1 past
      it), how many;
    - o_off (M + 1,): where modality m's levels start in a row of ``C``; ah_off (M + 1,): its block in ``AH``;
    - node_level (N,): each node's step (its depth), in depth-first pre-order (a node's parent is the last node
      before it one level up);
    - node_action (N, F): the controls of the node's step;
    - node_leaf (N,): a last-level node's position among the leaves, -1 elsewhere;
    - node_fresh (N, F + M): 1 where the node computes factor f's prediction (column f) or modality m's value
      (column F + m), 0 where its previous sibling's is the same;
    - policy_leaf (P,): each policy's leaf;
    - first_action (P, F): each policy's first step (the action it selects);
    - u_off (F + 1,): where factor f's values start in a noise row of marginal mode.
floats : (...,) the plan's dtype (float32 or float64)
    The float arrays, row-major, concatenated (P_f / P_m: the joint states of a transition's / a modality's
    dependencies, row-major as pymdp's axes):

    - Bc (1, sum_f u_f n_f P_f): B_f with its control axis first, (u_f, n_f, P_f), at ``bc_off[f]``;
    - AH (1, sum_m (m_m + 1) P_m): A_m (m_m, P_m), then -sum_o A_m log(max(A_m, MINVAL)) as a last row (pymdp's
      entropy of each column of A_m), at ``ah_off[m]``;
    - C (T, O): each step's preferences (pymdp's C, log-probabilities), modality m at ``o_off[m]``;
    - log_E (1, P): log(max(E, MINVAL)).
gamma : float
    Policy precision (the plan's dtype).
alpha : float
    Action precision, stochastic selection (the plan's dtype).
use_utility : bool
    Add the utility term.
use_info_gain : bool
    Add the state information gain term.
mode : int
    0 deterministic, 1 stochastic (full mode: one policy); 2 deterministic, 3 stochastic (marginal mode: each
    factor's first-step control).
minval : float
    pymdp's clip before a log (``MINVAL``), in the plan's dtype.
qs : (b, S)
    Each agent's packed beliefs (``s_off``).
noise : (b, K)
    Each agent's Gumbel noise (``action_noise``); read only in modes 1 and 3 (b rows of 0 values otherwise).
out : (b, 2, P)
    Written: each agent's neg_efe (row 0) and q_pi (row 1).
choice : (b, F + 1)
    Written: each agent's control per factor, then the chosen policy (-1 in marginal mode).
"""
from typing import Any, NamedTuple, Sequence

import numba
import numpy as np

from .common import inline, njit
from .fp_mode import flush_subnormals, restore_fp_mode
from .tick import _ints1, _ints2


class PolicyArgs(NamedTuple):
    """``policy_rows``' positional arguments, in order (each documented in the module's Arguments)."""

    ints: Any
    floats: Any
    gamma: Any
    alpha: Any
    use_utility: Any
    use_info_gain: Any
    mode: Any
    minval: Any
    qs: Any
    noise: Any
    out: Any
    choice: Any


#: The arguments a plan binds once (everything before the call's ``qs``).
PLAN_FIELDS = PolicyArgs._fields[:PolicyArgs._fields.index("qs")]
#: ``ints``' int arrays, in header order (slot j = position j).
INT_FIELDS = ("ns", "s_off", "bdeps", "bdims", "bks", "ncontrols", "bc_off", "deps", "dims", "ks", "o_off", "ah_off",
              "node_level", "node_action", "node_leaf", "node_fresh", "policy_leaf", "first_action", "u_off")
#: ``floats``' arrays, in header order (slot len(INT_FIELDS) + j).
FLOAT_FIELDS = ("Bc", "AH", "C", "log_E")
HEADER_WIDTH = 3
# the header slots, by name (the kernel reads them as constants)
_SLOTS = len(INT_FIELDS) + len(FLOAT_FIELDS)
(NS, S_OFF, BDEPS, BDIMS, BKS, NCONTROLS, BC_OFF, DEPS, DIMS, KS, O_OFF, AH_OFF, NODE_LEVEL, NODE_ACTION, NODE_LEAF,
 NODE_FRESH, POLICY_LEAF, FIRST_ACTION, U_OFF, BC_SLOT, AH_SLOT, C_SLOT, LOG_E_SLOT) = range(_SLOTS)


def pack_plan(int_arrays: Sequence[np.ndarray], float_arrays: Sequence[np.ndarray], dtype: Any
              ) -> tuple[np.ndarray, np.ndarray]:
    """(ints, floats) of the module's Arguments from the arrays of ``INT_FIELDS`` and ``FLOAT_FIELDS``, in order
    (numpy; every array 1-D or 2-D)."""
    n_arrays = len(int_arrays) + len(float_arrays)
    header, int_parts, float_parts = [], [], []
    offset = HEADER_WIDTH * n_arrays
    for a in int_arrays:
        a = np.asarray(a, np.int64)
        header += [offset, a.shape[0], a.shape[1] if a.ndim == 2 else 1]
        int_parts.append(a.ravel())
        offset += a.size
    offset = 0
    for a in float_arrays:
        a = np.asarray(a, dtype)
        header += [offset, a.shape[0], a.shape[1] if a.ndim == 2 else 1]
        float_parts.append(a.ravel())
        offset += a.size
    ints = np.concatenate([np.asarray(header, np.int64)] + int_parts)
    return np.ascontiguousarray(ints), np.ascontiguousarray(np.concatenate(float_parts), dtype)


@inline
def _floats2(ints, floats, j):
    o, r, c = ints[HEADER_WIDTH * j], ints[HEADER_WIDTH * j + 1], ints[HEADER_WIDTH * j + 2]
    return floats[o:o + r * c].reshape(r, c)


@inline
def _kron_into(w, Q, row, deps, dims, k):
    """``w[:size] = Q[row + deps[0]] x ... x Q[row + deps[k - 1]]`` (Kronecker, each ``Q`` row cut to ``dims[j]``),
    expanded in place from the last dependency; returns ``size``, the product of ``dims[:k]``."""
    size = dims[k - 1]
    g = row + deps[k - 1]
    for a in range(size):
        w[a] = Q[g, a]
    for j in range(k - 2, -1, -1):
        g = row + deps[j]
        for a in range(dims[j] - 1, -1, -1):
            qa = Q[g, a]
            dst = max(a * size, 0)
            for r in range(size):
                w[dst + r] = qa * w[r]
        size *= dims[j]
    return size


@numba.njit(nogil=True, fastmath={"reassoc"})
def _policy_rows(Bc, AH, C, log_E, ns, s_off, bdeps, bdims, bks, ncontrols, bc_off, deps, dims, ks, o_off, ah_off,
                 node_level, node_action, node_leaf, node_fresh, policy_leaf, first_action, u_off, gamma, alpha,
                 use_utility, use_info_gain, mode, minval, qs, noise, out, choice):
    """``policy_rows`` on the unpacked arrays (the module's Arguments name each). The node loop calls no helper
    (each array argument of an inlined helper costs reference counts per call: TUNING.md)."""
    F, M, T, P, N = ns.shape[0], ks.shape[0], C.shape[0], log_E.shape[0], node_level.shape[0]
    zero = minval - minval  # 0 in the kernel's dtype (a float literal would promote float32 to float64)
    n_max, w_max, m_max, u_max = 1, 1, 1, 1
    for f in range(F):
        n_max = max(n_max, ns[f])
        u_max = max(u_max, ncontrols[f])
        w_max = max(w_max, (bc_off[f + 1] - bc_off[f]) // (ncontrols[f] * ns[f]))
    for m in range(M):
        n_obs = o_off[m + 1] - o_off[m]
        m_max = max(m_max, n_obs + 1)
        w_max = max(w_max, (ah_off[m + 1] - ah_off[m]) // (n_obs + 1))
    n_leaves = 0
    for i in range(N):
        n_leaves = max(n_leaves, node_leaf[i] + 1)
    # the scratch in one allocation (each costs about as much as the default model's node)
    rows = (T + 1) * F
    sizes = (rows * n_max, T + 1, T * M, n_leaves, w_max, m_max)
    scratch = np.zeros(sum(sizes) + u_max, qs.dtype)
    Q = scratch[:sizes[0]].reshape(rows, n_max)  # the marginals predicted at step t at rows (t + 1) F + f
    o = sizes[0]
    running = scratch[o:o + sizes[1]]  # the value summed along the current prefix
    o += sizes[1]
    modality_value = scratch[o:o + sizes[2]]  # each modality's value at each step of the current prefix
    o += sizes[2]
    leaf_value = scratch[o:o + sizes[3]]
    o += sizes[3]
    w = scratch[o:o + sizes[4]]  # the product of some factors' marginals over their joint states (row-major)
    o += sizes[4]
    qo = scratch[o:o + sizes[5]]  # q(o_m), then the expected entropy of A_m's columns
    marginal = scratch[o + sizes[5]:]
    for b in range(qs.shape[0]):
        for f in range(F):
            for a in range(ns[f]):
                Q[f, a] = qs[b, s_off[f] + a]
        for i in range(N):
            t = node_level[i]
            qr, orow = t * F, (t + 1) * F
            # pymdp compute_expected_state: factor f's next marginal is B_f[..., u_f] contracted with the parent's
            # marginals of f's B-dependencies
            for f in range(F):
                if node_fresh[i, f] == 0:
                    continue
                n, k = ns[f], bks[f]
                # w = q_{d_0} x q_{d_1} x ... (Kronecker), expanded in place from the last dependency
                size = _kron_into(w, Q, qr, bdeps[f], bdims[f], k)
                base = max(bc_off[f] + node_action[i, f] * n * size, 0)
                for a in range(n):
                    acc = zero
                    row = base + a * size
                    for p in range(size):
                        acc += Bc[0, row + p] * w[p]
                    Q[orow + f, a] = acc
            # the step's utility and state information gain, modality by modality
            for m in range(M):
                if node_fresh[i, F + m] == 0:
                    continue
                k = ks[m]
                size = _kron_into(w, Q, orow, deps[m], dims[m], k)
                n_obs = o_off[m + 1] - o_off[m]
                base = max(ah_off[m], 0)
                for o in range(n_obs + 1):
                    acc = zero
                    row = base + o * size
                    for p in range(size):
                        acc += AH[0, row + p] * w[p]
                    qo[o] = acc
                value = zero
                if use_utility:
                    cb = max(o_off[m], 0)
                    for o in range(n_obs):
                        value += qo[o] * C[t, cb + o]
                if use_info_gain:
                    for o in range(n_obs):
                        x = qo[o]
                        if x != zero:  # pymdp's xlogy: 0 log 0 = 0
                            value -= x * np.log(x if x > minval else minval)
                    value -= qo[n_obs]
                modality_value[t * M + m] = value
            value = zero
            for m in range(M):
                value += modality_value[t * M + m]
            running[t + 1] = running[t] + value
            if node_leaf[i] >= 0:
                leaf_value[node_leaf[i]] = running[t + 1]
        # q_pi = softmax(gamma neg_efe + log E) (jax.nn.softmax: shifted by the maximum)
        top = gamma * leaf_value[policy_leaf[0]] + log_E[0]
        for p in range(P):
            g = leaf_value[policy_leaf[p]]
            out[b, 0, p] = g
            x = gamma * g + log_E[p]
            out[b, 1, p] = x
            top = max(top, x)
        total = zero
        for p in range(P):
            e = np.exp(out[b, 1, p] - top)
            out[b, 1, p] = e
            total += e
        for p in range(P):
            out[b, 1, p] = out[b, 1, p] / total
        if mode < 2:  # full: one policy, its first step's controls (pymdp sample_policy)
            best, pick = zero, -1
            for p in range(P):  # the first maximum, as jnp.argmax
                x = out[b, 1, p]
                if mode == 1:  # jax.random.categorical(key, alpha log q_pi): argmax of Gumbel noise + logits
                    x = noise[b, p] + alpha * np.log(x if x > minval else minval)
                if pick < 0 or x > best:
                    best, pick = x, p
            for f in range(F):
                choice[b, f] = first_action[pick, f]
            choice[b, F] = pick
        else:  # marginal: per factor, the first step's control under q_pi's marginal (pymdp sample_action)
            for f in range(F):
                for a in range(ncontrols[f]):
                    marginal[a] = zero
                for p in range(P):
                    marginal[first_action[p, f]] += out[b, 1, p]
                best, pick = zero, -1
                for a in range(ncontrols[f]):
                    x = marginal[a]
                    if mode == 3:
                        x = noise[b, u_off[f] + a] + alpha * np.log(x if x > minval else minval)
                    if pick < 0 or x > best:
                        best, pick = x, a
                choice[b, f] = pick
            choice[b, F] = -1


# The entry point sets the floating-point mode around a call of its kernel (not inside it: TUNING.md).
@njit
def policy_rows(ints, floats, gamma, alpha, use_utility, use_info_gain, mode, minval, qs, noise, out, choice):
    """qs (b, S) -> out (b, 2, P) (neg_efe, q_pi), choice (b, F + 1) (arguments: ``PolicyArgs``)."""
    Bc, AH = _floats2(ints, floats, BC_SLOT), _floats2(ints, floats, AH_SLOT)
    C, log_E = _floats2(ints, floats, C_SLOT), _floats2(ints, floats, LOG_E_SLOT)[0]
    fp_mode = flush_subnormals()
    _policy_rows(Bc, AH, C, log_E, _ints1(ints, NS), _ints1(ints, S_OFF), _ints2(ints, BDEPS), _ints2(ints, BDIMS),
                 _ints1(ints, BKS), _ints1(ints, NCONTROLS), _ints1(ints, BC_OFF), _ints2(ints, DEPS),
                 _ints2(ints, DIMS), _ints1(ints, KS), _ints1(ints, O_OFF), _ints1(ints, AH_OFF),
                 _ints1(ints, NODE_LEVEL), _ints2(ints, NODE_ACTION), _ints1(ints, NODE_LEAF), _ints2(ints, NODE_FRESH),
                 _ints1(ints, POLICY_LEAF), _ints2(ints, FIRST_ACTION), _ints1(ints, U_OFF), gamma, alpha, use_utility,
                 use_info_gain, mode, minval, qs, noise, out, choice)
    restore_fp_mode(fp_mode)


def policy_rows_entry(arguments: tuple) -> Any:
    """``policy_rows``' compiled entry point for the types of ``arguments`` (a full call's, in ``PolicyArgs``
    order), loaded from numba's cache or compiled: a call without the dispatcher's type resolution. Each later call
    must pass exactly these types (C-contiguous arrays of the same dtypes and ranks, scalars of the same types)."""
    return policy_rows.compile(tuple(numba.typeof(x) for x in arguments))
