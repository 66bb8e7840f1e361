"""Merged transition messages (variants/transitions.py) against pymdp 1.0.4's get_vmp_messages /
get_mmp_messages, message by message, for arbitrary B-dependencies.

The messages are log-quantities of magnitude up to |log MINVAL| = 36 per term, so they are compared in
float64 (1e-10, the suite's float64 tolerance); float32 exactness of the posteriors that use them is
tested through the end-to-end variants (test_end_to_end_variants.py).
"""
import numpy as np
import pytest

import jax
import jax.numpy as jnp

from bayes_infer_ros.inference.numerics import log_stable
from bayes_infer_ros.inference.variants.transitions import MergedTransitions, all_but_one, pad_states, unpad_states
from bayes_infer_ros.model.generative_model import ModelStructure
from conftest import enable_x64
from tolerances import FLOAT32_ATOL, FLOAT32_RTOL, FLOAT64_ATOL

# id -> (num_states, B_deps, num_controls)
STRUCTURES = {
    "trivial": ((3, 5, 2, 4), [[0], [1], [2], [3]], (2, 3, 1, 2)),
    "one_factor": ((4,), [[0]], (3,)),
    # factors depending on 2-3 factors, one not on itself, skewed sizes: three dependency-count groups
    "arbitrary": ((3, 5, 2, 4, 9), [[0], [1, 0], [3, 4, 1], [3], [4, 2]], (2, 3, 1, 2, 2)),
    "not_self": ((2, 6, 3), [[1, 2], [0], [2, 0, 1]], (1, 2, 3)),
    # 24 factors in three dependency shapes (one, two and three factors, repeated): one group per shape
    "many_factors": (tuple(3 + f % 3 for f in range(24)),
                     [[f] if f % 3 == 0 else [f, (f + 5) % 24] if f % 3 == 1 else [(f + 1) % 24, f, (f + 7) % 24]
                      for f in range(24)], tuple(1 + f % 3 for f in range(24))),
}


def _model(sid, T, seed, dtype):
    ns, bdeps, us = STRUCTURES[sid]
    rng = np.random.default_rng(seed)
    B = []
    for f, n in enumerate(ns):
        b = rng.random((n,) + tuple(ns[d] for d in bdeps[f]) + (us[f],))
        b[b < 0.15] = 0.0  # exact zeros
        b[0][b.sum(0) == 0] = 1.0
        B.append((b / b.sum(0, keepdims=True)).astype(dtype))
    actions = np.stack([rng.integers(-1, u, T - 1) for u in us], -1).astype(np.int32).reshape(T - 1, len(ns))
    qs = [rng.dirichlet(np.ones(n), size=T).astype(dtype) for n in ns]
    for q in qs:  # exact zeros in the posteriors too (pymdp's log_stable clip path)
        q[0, 0] = 0.0
        q[0] /= q[0].sum()
    prior = [rng.dirichlet(np.ones(n)).astype(dtype) for n in ns]
    trans_valid = rng.random(max(T - 1, 0)) < 0.7
    structure = ModelStructure((2,), tuple(ns), tuple(us), ((0,),), tuple(tuple(d) for d in bdeps))
    return structure, B, actions, qs, prior, trans_valid


def _pymdp_messages(kind, B, bdeps, actions, qs, prior, trans_valid):
    from pymdp import algos
    from pymdp.inference import _condition_transitions_on_actions

    Bc = _condition_transitions_on_actions([jnp.asarray(b) for b in B], jnp.asarray(actions))
    fn = algos.get_vmp_messages if kind == "vmp" else algos.get_mmp_messages
    deps = [list(d) for d in bdeps]

    @jax.jit  # pymdp op by op is slow; one jitted call per case
    def run(Bc, qs, prior, trans_valid):
        ln_prior = [log_stable(p) for p in prior]
        return fn([log_stable(b) for b in Bc], Bc, qs, ln_prior, deps, transition_valid_mask=trans_valid)

    return run(Bc, [jnp.asarray(q) for q in qs], [jnp.asarray(p) for p in prior], jnp.asarray(trans_valid))


def _ours(kind, structure, B, actions, qs, prior, trans_valid, dtype):
    ops, params = MergedTransitions.prepare(structure, [b[None] for b in B], dtype)
    single = jax.tree_util.tree_map(lambda x: x[0], params)

    @jax.jit
    def run(params, actions, qs, ln_prior, trans_valid):
        cond = ops.condition(params, actions)
        fn = ops.vmp_messages if kind == "vmp" else ops.mmp_messages
        return fn(params, cond, qs, ln_prior, trans_valid)

    ln_prior = [log_stable(jnp.asarray(p)) for p in prior]
    return run(single, jnp.asarray(actions), [jnp.asarray(q) for q in qs], ln_prior, jnp.asarray(trans_valid))


def _max_diff(a, b):
    return max(float(np.max(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64)))) for x, y in zip(a, b))


@pytest.mark.oracle
@pytest.mark.parametrize("sid,T", [(sid, 4) for sid in STRUCTURES] + [("arbitrary", 1), ("not_self", 2)])
def test_messages_match_pymdp_float64(sid, T):
    with enable_x64():
        structure, B, actions, qs, prior, trans_valid = _model(sid, T, seed=10 * list(STRUCTURES).index(sid) + T, dtype=np.float64)
        for kind in ("vmp", "mmp"):
            want_f, want_p = _pymdp_messages(kind, B, structure.B_dependencies, actions, qs, prior, trans_valid)
            got_f, got_p = _ours(kind, structure, B, actions, qs, prior, trans_valid, np.float64)
            want_p = [jnp.broadcast_to(w, g.shape) for w, g in zip(want_p, got_p)]
            assert _max_diff(got_f, want_f) <= FLOAT64_ATOL, kind
            assert _max_diff(got_p, want_p) <= FLOAT64_ATOL, kind


@pytest.mark.oracle
@pytest.mark.parametrize("kind", ["vmp", "mmp"])
def test_messages_float32_close_to_pymdp(kind):
    """float32: the same messages within a few ulps of their magnitude (they are sums of log terms)."""
    structure, B, actions, qs, prior, trans_valid = _model("arbitrary", 4, seed=3, dtype=np.float32)
    want_f, want_p = _pymdp_messages(kind, B, structure.B_dependencies, actions, qs, prior, trans_valid)
    got_f, got_p = _ours(kind, structure, B, actions, qs, prior, trans_valid, np.float32)
    for got, want in ((got_f, want_f), (got_p, want_p)):
        for g, w in zip(got, want):
            w = np.broadcast_to(np.asarray(w), g.shape)
            assert np.allclose(g, w, rtol=FLOAT32_RTOL, atol=FLOAT32_ATOL), np.max(np.abs(g - w))


def test_without_B_matches_pymdp_conventions():
    structure, _, _, qs, prior, tv = _model("trivial", 3, seed=0, dtype=np.float32)
    ops, params = MergedTransitions.prepare(structure, None, np.float32)
    assert params == {} and not ops.has_B
    ln_prior = [log_stable(jnp.asarray(p)) for p in prior]
    fu, pa = ops.vmp_messages(params, ops.condition(params, None), qs, ln_prior, jnp.asarray(tv))
    assert fu == [0.0] * 4 and pa == [0.0] * 4
    fu, pa = ops.mmp_messages(params, None, qs, ln_prior, jnp.asarray(tv))
    assert all(np.array_equal(f, lp[None]) for f, lp in zip(fu, ln_prior)) and pa == [0.0] * 4


def test_plan_is_static_and_merge_round_trips():
    """The plan is hashable by value; the merged tensor holds every B[f] (axes reordered) plus the
    neutral column, and nothing else: merge then deconstruct equals the inputs."""
    structure, B, *_ = _model("arbitrary", 3, seed=1, dtype=np.float32)
    ops, params = MergedTransitions.prepare(structure, [b[None] for b in B], np.float32)
    ops2, _ = MergedTransitions.prepare(structure, [b[None] * 1.0 for b in B], np.float32)
    assert ops == ops2 and hash(ops) == hash(ops2)
    assert [g.k for g in ops.groups] == [1, 2, 3]
    total_real = 0
    for g, merged in zip(ops.groups, params["B"]):
        merged = np.asarray(merged)[0]  # (G, U+1, N0, ...)
        assert merged.shape == (len(g.factors), g.controls + 1) + g.shape
        for r, (f, axes) in enumerate(zip(g.factors, g.axes)):
            n_f, u_f = structure.num_states[f], structure.num_controls[f]
            block = merged[r][(slice(0, u_f), slice(0, n_f)) + tuple(slice(0, structure.num_states[d]) for d in g.deps[r])]
            # undo the axis reordering: block axes (u, n_f, deps in `axes` order)
            back = np.moveaxis(block, 0, -1)
            inverse = np.argsort(axes)
            back = np.transpose(back, (0,) + tuple(1 + int(a) for a in inverse) + (len(axes) + 1,))
            np.testing.assert_array_equal(back, B[f])
            neutral = merged[r, g.controls]
            real = (slice(0, n_f),) + tuple(slice(0, structure.num_states[d]) for d in g.deps[r])
            np.testing.assert_allclose(neutral[real], np.float32(1.0 / n_f))
            total_real += block.size + neutral[real].size
            assert np.count_nonzero(merged[r]) <= block.size + neutral[real].size
    assert ops.stored_elements() >= 2 * total_real


def test_all_but_one_matches_einsum():
    rng = np.random.default_rng(0)
    shape = (3, 4, 2, 5, 3)
    x = jnp.asarray(rng.random(shape))
    vecs = [jnp.asarray(rng.random((3, n))) for n in shape[1:]]
    got = all_but_one(x, vecs)
    letters = "abcd"
    for j in range(4):
        others = [l for l in range(4) if l != j]
        want = jnp.einsum("z" + letters + "," + ",".join("z" + letters[l] for l in others) + "->z" + letters[j],
                          x, *[vecs[l] for l in others])
        np.testing.assert_allclose(got[j], want, rtol=FLOAT32_RTOL)


def test_pad_unpad_round_trip():
    xs = [jnp.arange(3.0), jnp.arange(5.0), jnp.arange(1.0)]
    padded = pad_states(xs, 5)
    assert padded.shape == (3, 5) and float(padded[0, 3:].sum()) == 0.0
    assert all(np.array_equal(a, b) for a, b in zip(unpad_states(padded, (3, 5, 1)), xs))
