"""Merged transition messages (VMP, MMP) in axis-aligned form, for arbitrary B-dependencies.

The paper merges only likelihood messages and restricts B to trivial dependencies (its future work).
Here the F transition tensors are padded and stacked ONCE at build time, so the forward and backward
messages of all factors come from a few batched contractions instead of a loop over factors:

* Factors are grouped by the length k of their B-dependency list (rank clustering applied to B; with
  pymdp's default trivial dependencies there is exactly one group, k = 1).
* Inside a group the dependency axes of every factor are reordered by decreasing size (a contraction is
  symmetric in its axes, so this is exact) and zero-padded to per-axis maxima ``(N0, N1, ..., Nk)``;
  the control axis is padded to ``U = max u_f`` and one extra control column ``U`` holds pymdp's
  "neutral" transition (1 / n_f on the real block, 0 in the padding), so conditioning on actions,
  negative ones included, is ONE gather per group. ``log B`` is stored next to ``B`` (VMP uses the
  log, MMP the probabilities; jit drops the unused gather).
* Posteriors travel as one zero-padded ``(T, F, n_max)`` array. Padded entries of q are exactly 0,
  so padded tensor entries never reach a real output. The backward message of factor f sums one
  contribution per (factor i, dependency slot j) with ``B_dependencies[i][j] == f``; all those
  contributions are scattered into place by one permutation (trivial dependencies) or one 0/1
  incidence matmul (arbitrary dependencies), which adds exact zeros only.

Each contribution is computed exactly as pymdp 1.0.4 ``get_vmp_messages`` / ``get_mmp_messages`` do
(same products, same clip-before-log, same half weights and validity masks); only the summation order
inside a contraction may differ (rounding level).

Shapes (one model; the engine vmaps over the batch axis): ``q`` (T, n_f) per factor, or the padded
``(T, F, n_max)``. ``trans_valid`` (T-1,) bool. Everything in the ops dataclasses is a static int/tuple.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ...model.generative_model import ModelStructure
from ..merging.axis_aligned import stack_vectors
from ..numerics import MINVAL, log_stable, log_stable_np

Array = jax.Array

__all__ = ["TransitionGroup", "MergedTransitions", "pad_states", "unpad_states"]


# ---- small helpers (static layout) ---------------------------------------------------------------
def pad_states(xs: Sequence[Array], n_max: int) -> Array:
    """xs[f]: (..., n_f) -> (..., F, n_max), zero-padded on the last axis (one concatenation and one gather)."""
    return stack_vectors(xs, n_max)


def unpad_states(x: Array, num_states: Sequence[int]) -> list[Array]:
    """(..., F, n_max) -> list of (..., n_f)."""
    return [x[..., f, :n] for f, n in enumerate(num_states)]


def _take_factors(x: Array, index: tuple[int, ...], width: int) -> Array:
    """x: (T, F, n_max) -> (T, len(index), width); a slice when ``index`` is a contiguous run."""
    start = index[0]
    if index == tuple(range(start, start + len(index))):
        return x[:, start:start + len(index), :width]
    return x[:, np.asarray(index), :width]


def outer_flat(vectors: Sequence[Array]) -> Array:
    """vectors[j]: (B, n_j) -> (B, prod n_j): row-major outer product (first vector varies slowest)."""
    out = vectors[0]
    for v in vectors[1:]:
        out = (out[:, :, None] * v[:, None, :]).reshape(out.shape[0], out.shape[1] * v.shape[1])
    return out


def contract_trailing(x: Array, vectors: Sequence[Array]) -> Array:
    """x: (B, n_0, n_1, ..., n_k), vectors[j]: (B, n_{j+1}) -> (B, n_0): every trailing axis contracted.

    One canonical batched mat-vec against the outer product of the vectors.
    """
    B, n0 = x.shape[0], x.shape[1]
    P = int(np.prod(x.shape[2:], dtype=np.int64))
    return jnp.einsum("bnp,bp->bn", x.reshape(B, n0, P), outer_flat(vectors))


def all_but_one(x: Array, vectors: Sequence[Array]) -> list[Array]:
    """x: (B, n_1, ..., n_k), vectors[j]: (B, n_j) -> for each axis j, x contracted with every vector
    except j's: a list of k arrays (B, n_j). (pymdp's per-factor ``factor_dot(..., keep_dims=(j,))``.)

    Divide and conquer: view x as a (B, left, right) matrix, contract the right half with the outer
    product of its vectors and recurse on the left, and vice versa: two passes over the full tensor per
    level instead of one per axis. The outer product of each half is built once, from the outer products of
    its own halves (the nodes below it), so the program holds O(k) products, not O(k log k). Every contraction
    is a canonical batched mat-vec / vec-mat: on XLA:CPU a dot whose loop-invariant operand needs a transpose
    (as an einsum contracting a leading axis of the log-likelihood or of B inside the iteration loop does)
    falls back to a path about 10x slower.
    """
    B = x.shape[0]
    outers: dict[tuple[int, int], Array] = {}

    def outer(a: int, b: int) -> Array:
        """(B, prod n_a..n_{b-1}): the row-major outer product of vectors[a:b] (a node of the recursion)."""
        if (a, b) not in outers:
            if b - a == 1:
                outers[a, b] = vectors[a]
            else:
                h = a + (b - a) // 2
                lo, hi = outer(a, h), outer(h, b)
                outers[a, b] = (lo[:, :, None] * hi[:, None, :]).reshape(B, lo.shape[1] * hi.shape[1])
        return outers[a, b]

    def split(y: Array, a: int, b: int) -> list[Array]:
        if b - a == 1:
            return [y.reshape(B, y.shape[1])]
        h = a + (b - a) // 2
        left, right = y.shape[1:1 + h - a], y.shape[1 + h - a:]
        nl, nr = int(np.prod(left, dtype=np.int64)), int(np.prod(right, dtype=np.int64))
        mat = y.reshape(B, nl, nr)
        y_left = jnp.einsum("blr,br->bl", mat, outer(h, b)).reshape((B,) + left)
        y_right = jnp.einsum("bl,blr->br", outer(a, h), mat).reshape((B,) + right)
        return split(y_left, a, h) + split(y_right, h, b)

    return split(x, 0, len(vectors))


@dataclass(frozen=True)
class TransitionGroup:
    """Factors sharing one B-dependency count, merged into one padded tensor (static only).

    factors: (G,) factor indices in this group (ascending)
    deps:    G tuples of length k: each factor's dependencies, reordered by decreasing size
    axes:    G tuples: the original positions (in B_dependencies[f]) of ``deps``
    shape:   (N0, N1, ..., Nk): padded next-state axis then padded dependency axes
    controls: U, the padded control count; column U holds the neutral transition
    """

    factors: tuple[int, ...]
    deps: tuple[tuple[int, ...], ...]
    axes: tuple[tuple[int, ...], ...]
    shape: tuple[int, ...]
    controls: int

    @property
    def k(self) -> int:
        return len(self.shape) - 1

    def dep_index(self, j: int) -> tuple[int, ...]:
        """Factor feeding dependency slot j (0-based over the dependency axes) for every member."""
        return tuple(d[j] for d in self.deps)


@dataclass(frozen=True)
class MergedTransitions:
    """TransitionOps: merged axis-aligned transition messages, exact for arbitrary B_dependencies.

    params (each leaf with the engine's leading batch axis b):
      "B":     per group (b, G, U+1, N0, N1, ..., Nk) padded B, control axis second, neutral column last
      "log_B": the same for log_stable(B) (0 in the padding)
    """

    padded: ClassVar[bool] = True  # ``vmp_messages_padded`` / ``mmp_messages_padded`` on the padded posterior

    num_states: tuple[int, ...]
    n_max: int
    has_B: bool
    groups: tuple[TransitionGroup, ...]
    # backward scatter: targets of the concatenated (group, slot) contributions, static
    past_targets: tuple[int, ...]
    forward_order: tuple[int, ...]  # factor order of the concatenated forward messages

    # ---- build ----------------------------------------------------------------------------------
    @classmethod
    def plan(cls, structure: ModelStructure, has_B: bool = True) -> "MergedTransitions":
        ns = tuple(int(n) for n in structure.num_states)
        F = len(ns)
        n_max = max(ns) if ns else 1
        if not has_B:
            return cls(ns, n_max, False, (), (), ())
        by_k: dict[int, list[int]] = {}
        for f, deps in enumerate(structure.B_dependencies):
            by_k.setdefault(len(deps), []).append(f)
        groups = []
        for k in sorted(by_k):
            members = tuple(by_k[k])
            deps_sorted, axes_sorted = [], []
            for f in members:
                deps = structure.B_dependencies[f]
                order = tuple(sorted(range(k), key=lambda j: (-ns[deps[j]], j)))
                axes_sorted.append(order)
                deps_sorted.append(tuple(deps[j] for j in order))
            shape = (max(ns[f] for f in members),) + tuple(
                max(ns[d[j]] for d in deps_sorted) for j in range(k)
            )
            U = max(int(structure.num_controls[f]) for f in members)
            groups.append(TransitionGroup(members, tuple(deps_sorted), tuple(axes_sorted), shape, U))
        targets = tuple(d[j] for g in groups for j in range(g.k) for d in g.deps)
        order = tuple(f for g in groups for f in g.factors)
        assert sorted(order) == list(range(F))
        return cls(ns, n_max, True, tuple(groups), targets, order)

    @classmethod
    def prepare(cls, structure: ModelStructure, B: Optional[Sequence[np.ndarray]], dtype: Any) -> tuple["MergedTransitions", dict]:
        """B[f]: (b, n_f, n_deps..., u_f) -> (ops, params). All padding/merging happens here, once."""
        if B is None:
            return cls.plan(structure, has_B=False), {}
        ops = cls.plan(structure, has_B=True)
        b = int(np.shape(B[0])[0])
        merged_B, merged_log_B = [], []
        for g in ops.groups:
            G = len(g.factors)
            arr = np.zeros((b, G, g.controls + 1) + g.shape, dtype=np.float64)
            log_arr = np.zeros_like(arr)
            for r, (f, axes) in enumerate(zip(g.factors, g.axes)):
                bf = np.asarray(B[f], dtype=np.float64)  # (b, n_f, deps..., u_f)
                k = len(axes)
                # (b, n_f, deps (reordered)..., u) -> (b, u, n_f, deps...)
                bf = np.transpose(bf, (0, 1) + tuple(2 + a for a in axes) + (2 + k,))
                bf = np.moveaxis(bf, -1, 1)
                u = bf.shape[1]
                real = (slice(None), r) + (slice(0, u),) + tuple(slice(0, n) for n in bf.shape[2:])
                arr[real] = bf
                log_arr[real] = log_stable_np(bf)
                block = (slice(None), r, g.controls) + tuple(slice(0, n) for n in bf.shape[2:])
                n_f = structure.num_states[f]
                neutral = 1.0 / max(float(n_f), MINVAL)
                arr[block] = neutral
                log_arr[block] = np.log(neutral)
            merged_B.append(jnp.asarray(arr, dtype=dtype))
            merged_log_B.append(jnp.asarray(log_arr, dtype=dtype))
        return ops, {"B": merged_B, "log_B": merged_log_B}

    # ---- run time -------------------------------------------------------------------------------
    def condition(self, params: dict, actions: Array) -> Any:
        """actions: (T-1, F) int -> per group (T-1, G, N0, ..., Nk) selected B and log B.

        A negative action selects the neutral column (pymdp's 'neutral' invalid-action mode).
        """
        if not self.has_B:
            return None
        actions = actions.astype(jnp.int32)
        out_B, out_log_B = [], []
        for g, bg, lbg in zip(self.groups, params["B"], params["log_B"]):
            a = actions[:, np.asarray(g.factors)]  # (T-1, G)
            a = jnp.where(a < 0, g.controls, a)
            rows = jnp.arange(len(g.factors))[None, :]
            out_B.append(bg[rows, a])
            out_log_B.append(lbg[rows, a])
        # MMP's backward operand for single-dependency factors does not depend on q: normalise it once
        # per call here rather than once per iteration inside the loop.
        out_norm = [b / jnp.clip(b.sum(-1, keepdims=True), min=MINVAL) if g.k == 1 else None
                    for g, b in zip(self.groups, out_B)]
        return {"B": out_B, "log_B": out_log_B, "B_norm": out_norm}

    def _scatter_past(self, contributions: list[Array]) -> Array:
        """contributions: list of (T-1, G_g, N_j) in ``past_targets`` order -> (T-1, F, n_max)."""
        padded = [jnp.pad(c, ((0, 0), (0, 0), (0, self.n_max - c.shape[-1]))) for c in contributions]
        stacked = jnp.concatenate(padded, axis=1) if len(padded) > 1 else padded[0]  # (T-1, R, n_max)
        F = len(self.num_states)
        targets = self.past_targets
        if sorted(targets) == list(range(F)):  # every factor receives exactly one contribution
            if targets == tuple(range(F)):
                return stacked
            return stacked[:, np.argsort(np.asarray(targets))]
        incidence = np.zeros((F, len(targets)), dtype=np.dtype(stacked.dtype))
        incidence[np.asarray(targets), np.arange(len(targets))] = 1.0
        return jnp.einsum("fr,trn->tfn", incidence, stacked)

    def _gather_forward(self, parts: list[Array]) -> Array:
        """parts: per group (T-1, G_g, N0_g) -> (T-1, F, n_max) in factor order."""
        padded = [jnp.pad(p, ((0, 0), (0, 0), (0, self.n_max - p.shape[-1]))) for p in parts]
        stacked = jnp.concatenate(padded, axis=1) if len(padded) > 1 else padded[0]
        if self.forward_order == tuple(range(len(self.num_states))):
            return stacked
        return stacked[:, np.argsort(np.asarray(self.forward_order))]

    def _group_inputs(self, g: TransitionGroup, Q: Array) -> tuple[Array, list[Array]]:
        q_next = _take_factors(Q[1:], g.factors, g.shape[0])
        q_deps = [_take_factors(Q[:-1], g.dep_index(j), g.shape[1 + j]) for j in range(g.k)]
        return q_next, q_deps

    def _flat_group(self, g: TransitionGroup, x: Array, Q: Array) -> tuple[Array, Array, list[Array], int]:
        """Fold (T-1, G) into one batch axis: x (T-1, G, N0, ...) -> (B, N0, ...), q_next (B, N0),
        q_deps[j] (B, N_{j+1})."""
        q_next, q_deps = self._group_inputs(g, Q)
        B = x.shape[0] * x.shape[1]
        return (x.reshape((B,) + g.shape), q_next.reshape(B, g.shape[0]),
                [q.reshape(B, n) for q, n in zip(q_deps, g.shape[1:])], B)

    def vmp_messages_padded(self, params: dict, cond: Any, Q: Array, ln_prior: Array, trans_valid: Array) -> tuple[Array, Array]:
        """pymdp ``get_vmp_messages`` on padded arrays.

        Q: (T, F, n_max) posteriors (exact zeros in the padding); ln_prior: (F, n_max).
        Returns (lnB_future, lnB_past), each (T, F, n_max); entries past n_f are unspecified (finite).
        """
        T = Q.shape[0]
        forward, contributions = [], []
        for g, ln_b in zip(self.groups, cond["log_B"]):
            G = len(g.factors)
            x, q_next, q_deps, B = self._flat_group(g, ln_b, Q)
            forward.append(contract_trailing(x, q_deps).reshape(T - 1, G, g.shape[0]))
            # E_{q(s_i, t+1)}[ln B_i] once, then every all-but-one marginal over the dependency slots
            P = int(np.prod(g.shape[1:], dtype=np.int64))
            expected = jnp.einsum("bn,bnp->bp", q_next, x.reshape(B, g.shape[0], P)).reshape((B,) + g.shape[1:])
            contributions += [c.reshape(T - 1, G, n) for c, n in zip(all_but_one(expected, q_deps), g.shape[1:])]
        return self._finish(T, forward, contributions, ln_prior, trans_valid, half=False)

    def mmp_messages_padded(self, params: dict, cond: Any, Q: Array, ln_prior: Array, trans_valid: Array) -> tuple[Array, Array]:
        """pymdp ``get_mmp_messages`` on padded arrays (same shapes as ``vmp_messages_padded``)."""
        T = Q.shape[0]
        forward, contributions = [], []
        for g, b, b_norm_1 in zip(self.groups, cond["B"], cond["B_norm"]):
            G, N0 = len(g.factors), g.shape[0]
            x, q_next, q_deps, B = self._flat_group(g, b, Q)
            forward.append(log_stable(contract_trailing(x, q_deps)).reshape(T - 1, G, N0))
            if g.k == 1:
                norms = [b_norm_1.reshape(B, N0, g.shape[1])]
            else:  # keep the next-state axis: fold it into the batch, repeat the dependency posteriors
                reps = [jnp.broadcast_to(q[:, None, :], (B, N0, q.shape[1])).reshape(B * N0, q.shape[1]) for q in q_deps]
                margs = [m.reshape(B, N0, n) for m, n in
                         zip(all_but_one(x.reshape((B * N0,) + g.shape[1:]), reps), g.shape[1:])]
                # marg: (B, N0, N_j) = B_i with the other slots contracted, normalised over slot j
                norms = [m / jnp.clip(m.sum(-1, keepdims=True), min=MINVAL) for m in margs]
            for b_norm, n in zip(norms, g.shape[1:]):
                msg = log_stable(jnp.einsum("bn,bnj->bj", q_next, b_norm)) * 0.5
                contributions.append(msg.reshape(T - 1, G, n))
        return self._finish(T, forward, contributions, ln_prior, trans_valid, half=True)

    def _finish(self, T: int, forward: list[Array], contributions: list[Array], ln_prior: Array,
                trans_valid: Array, half: bool) -> tuple[Array, Array]:
        """Masks, the t=0 prior, MMP's half weights, and the scatter into (T, F, n_max)."""
        valid = trans_valid[:, None, None]
        start = jnp.concatenate([jnp.ones((1,), dtype=bool), jnp.logical_not(trans_valid)])[:, None, None]
        fwd = jnp.where(valid, self._gather_forward(forward), 0.0)
        fwd = jnp.concatenate([ln_prior[None], fwd], axis=0)
        fwd = jnp.where(start, jnp.broadcast_to(ln_prior[None], fwd.shape), fwd)
        if half:
            outgoing = jnp.concatenate([trans_valid, jnp.zeros((1,), dtype=bool)])[:, None, None]
            fwd = fwd * jnp.where(outgoing, 0.5, 1.0)
        past = jnp.where(valid, self._scatter_past(contributions), 0.0)
        past = jnp.pad(past, ((0, 1), (0, 0), (0, 0)))
        return fwd, past

    # ---- the TransitionOps list API (what the shared drivers call) ----------------------------------
    def vmp_messages(self, params: dict, cond: Any, qs: Sequence[Array], ln_prior: Sequence[Array], trans_valid: Array):
        """qs[f]: (T, n_f) -> (lnB_future, lnB_past), lists of (T, n_f): pymdp ``get_vmp_messages``."""
        if not self.has_B:
            return [0.0] * len(qs), [0.0] * len(qs)
        fwd, past = self.vmp_messages_padded(params, cond, pad_states(qs, self.n_max),
                                             pad_states(ln_prior, self.n_max), trans_valid)
        return unpad_states(fwd, self.num_states), unpad_states(past, self.num_states)

    def mmp_messages(self, params: dict, cond: Any, qs: Sequence[Array], ln_prior: Sequence[Array], trans_valid: Array):
        """qs[f]: (T, n_f) -> (lnB_future, lnB_past), lists of (T, n_f): pymdp ``get_mmp_messages``."""
        if not self.has_B:
            return [lp[None] for lp in ln_prior], [0.0] * len(qs)
        fwd, past = self.mmp_messages_padded(params, cond, pad_states(qs, self.n_max),
                                             pad_states(ln_prior, self.n_max), trans_valid)
        return unpad_states(fwd, self.num_states), unpad_states(past, self.num_states)

    # ---- bookkeeping ------------------------------------------------------------------------------
    def stored_elements(self) -> int:
        """Elements of the prepared arrays for one model (B and log B, padding included)."""
        return 2 * sum(len(g.factors) * (g.controls + 1) * int(np.prod(g.shape)) for g in self.groups)
