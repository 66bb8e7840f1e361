"""Merging primitives: round trips (merge then deconstruct equals the inputs), merged contractions equal
the looped ones, BCOO storage, clustering (rank, agglomerative + elbow rule), plans and parameter counts."""
import itertools

import jax.numpy as jnp
import numpy as np
import pytest

from bayes_infer_ros.inference.merging import axis_aligned as aa
from bayes_infer_ros.inference.merging import block_diagonal as bd
from bayes_infer_ros.inference.merging.clustering import agglomerative_clusters, elbow_index, rank_clusters
from bayes_infer_ros.inference import PAPER_VARIANTS, parameter_counts, sizes, variant_ops
from bayes_infer_ros.inference.merging.sparse import bcoo_from_blocks, bcoo_from_dense, bcoo_matvec, bcoo_todense
from bayes_infer_ros.model import GenerativeModel, ModelStructure
from tolerances import FLOAT32_ATOL

# items: (m_i, lagging shape); mixed ranks, skewed sizes, a rank-6 item, a size-1 axis
ITEMS = [(3, (4,)), (5, (2, 6)), (2, (7, 1, 3)), (4, (2, 2, 2, 2, 3, 2)), (1, (5,)), (6, (3, 9))]


def _arrays(rng, items, b=2, zeros=0.3):
    out = []
    for m, lag in items:
        x = rng.standard_normal((b, m) + lag)
        out.append(np.where(rng.random(x.shape) < zeros, 0.0, x).astype(np.float32))
    return out


def _looped(arrays, vectors):
    return [np.tensordot(v, a, axes=(0, 0)) for a, v in zip(arrays, vectors)]


def _one_merged_model(seed, make_plan, merge):
    """ITEMS for one model, merged with ``make_plan``/``merge``, and one random vector per item:
    (arrays, plan, the merged array of model 0, vectors)."""
    rng = np.random.default_rng(seed)
    arrays = _arrays(rng, ITEMS, b=1)
    plan = make_plan([m for m, _ in ITEMS], [lag for _, lag in ITEMS])
    merged = jnp.asarray(merge(plan, arrays)[0])
    vectors = [rng.random(m) for m, _ in ITEMS]
    return arrays, plan, merged, vectors


def _assert_equals_loop(got, arrays, vectors):
    """A merged contraction's per-item results equal one tensordot per item (model 0 of ``arrays``)."""
    for g, w in zip(got, _looped([a[0] for a in arrays], vectors)):
        assert g.shape == w.shape
        np.testing.assert_allclose(np.asarray(g), w, atol=FLOAT32_ATOL)


# ---- axis-aligned ----------------------------------------------------------------------------------
@pytest.mark.parametrize("global_max", [False, True])
def test_axis_aligned_round_trip_and_padding(global_max):
    rng = np.random.default_rng(0)
    arrays = _arrays(rng, ITEMS)
    plan = aa.axis_aligned_plan([m for m, _ in ITEMS], [lag for _, lag in ITEMS], global_max=global_max)
    k = max(len(lag) for _, lag in ITEMS)
    if global_max:
        assert plan.padded_lagging == (9,) * k
    else:  # per-axis maxima over the items that have that axis
        assert plan.padded_lagging == (7, 9, 3, 2, 3, 2)
    merged = aa.merge_arrays(plan, arrays, fill=-7.0)
    assert merged.shape == (2,) + plan.merged_shape and plan.merged_size == int(np.prod(plan.merged_shape))
    for a, back in zip(arrays, aa.split_arrays(plan, merged)):
        np.testing.assert_array_equal(a, back)
    # everything outside the items is padding
    assert np.count_nonzero(merged == -7.0) == merged.size - 2 * plan.unmerged_size


def test_axis_aligned_merged_contraction_equals_loop():
    arrays, plan, merged, vectors = _one_merged_model(1, aa.axis_aligned_plan, aa.merge_arrays)
    padded = aa.merge_vectors(plan, [jnp.asarray(v) for v in vectors])
    assert padded.shape == (len(ITEMS), plan.padded_lead)
    _assert_equals_loop(aa.deconstruct(plan, aa.merged_contract(merged, padded)), arrays, vectors)


def test_axis_aligned_plan_is_static_and_hashable():
    p1 = aa.axis_aligned_plan([3, 2], [(4,), (2, 5)])
    p2 = aa.axis_aligned_plan((3, 2), ((4,), (2, 5)))
    assert p1 == p2 and hash(p1) == hash(p2)
    assert all(isinstance(x, int) for x in p1.lead_sizes + p1.padded_lagging)


# ---- block-diagonal -------------------------------------------------------------------------------
def test_block_diagonal_round_trip_and_structure():
    rng = np.random.default_rng(2)
    arrays = _arrays(rng, ITEMS)
    plan = bd.block_diagonal_plan([m for m, _ in ITEMS], [lag for _, lag in ITEMS])
    assert plan.row_sizes == tuple(int(np.prod(lag)) for _, lag in ITEMS)
    merged = bd.merge_arrays(plan, arrays, fill=np.nan)
    assert merged.shape == (2, sum(plan.row_sizes), sum(m for m, _ in ITEMS))
    for a, back in zip(arrays, bd.split_arrays(plan, merged)):
        np.testing.assert_array_equal(a, back)
    assert np.isnan(merged).sum() == merged.size - 2 * plan.unmerged_size  # off-diagonal blocks only


@pytest.mark.parametrize("block", [False, True])
def test_flat_positions_read_each_item_out_of_the_merged_product(block):
    """``flat_positions`` (the hybrids' deconstruction by one gather) picks each item's entries out of the flattened
    merged product: the same values as the per-item loop."""
    module = bd if block else aa
    arrays, plan, merged, vectors = _one_merged_model(9, module.block_diagonal_plan if block else aa.axis_aligned_plan,
                                                      module.merge_arrays)
    if block:
        flat = np.asarray(merged @ bd.concat_vectors([jnp.asarray(v, jnp.float32) for v in vectors]))
    else:
        flat = np.asarray(aa.merged_contract(merged, aa.merge_vectors(plan, [jnp.asarray(v, jnp.float32)
                                                                            for v in vectors]))).reshape(-1)
    _assert_equals_loop([flat[module.flat_positions(plan, i)] for i in range(len(ITEMS))], arrays, vectors)


def test_stack_vectors_pads_and_stacks_in_one_gather():
    """Vectors of different lengths (with a leading time axis) -> (T, count, width), zeros past each length."""
    rng = np.random.default_rng(3)
    vectors = [rng.random((4, n)).astype(np.float32) for n in (3, 1, 5, 2)]
    got = np.asarray(aa.stack_vectors([jnp.asarray(v) for v in vectors], 6))
    want = np.stack([np.pad(v, ((0, 0), (0, 6 - v.shape[1]))) for v in vectors], axis=1)
    assert got.shape == (4, 4, 6) and np.array_equal(got, want)


def test_modality_groups_by_rank_with_bounded_padding():
    """Same-rank modalities share a group while padding stays within GROUP_WASTE x their real size (or the slack): a
    big rank-2 modality takes four small ones along, the other six form their own group; ranks never mix; every
    modality once, ascending, axes in decreasing size."""
    ns = (30, 30, 2, 2, 3)
    deps = ((0, 1),) + ((2, 3),) * 10 + ((4,), (2,), (0, 2, 4))
    structure = ModelStructure((2,) * len(deps), ns, (1,) * len(ns), deps, tuple((f,) for f in range(len(ns))))
    groups = sizes.modality_groups(structure)
    assert [g for g, _ in groups] == [(11, 12), (0, 1, 2, 3, 4), (5, 6, 7, 8, 9, 10), (13,)]
    assert [shape for _, shape in groups] == [(3,), (30, 30), (2, 2), (30, 3, 2)]
    lag = sizes.lagging_shapes(structure)
    for members, shape in groups:
        real = sum(int(np.prod(lag[i])) for i in members)
        assert len(members) * int(np.prod(shape)) <= max(sizes.GROUP_WASTE * real, real + sizes.GROUP_SLACK_ELEMENTS)


def test_block_diagonal_matvec_equals_loop():
    arrays, plan, merged, vectors = _one_merged_model(3, bd.block_diagonal_plan, bd.merge_arrays)
    _assert_equals_loop(bd.split_flat(plan, merged @ bd.concat_vectors([jnp.asarray(v) for v in vectors])), arrays,
                        vectors)


# ---- BCOO -----------------------------------------------------------------------------------------
def test_bcoo_from_dense_round_trip_batched_nse():
    rng = np.random.default_rng(4)
    dense = np.where(rng.random((3, 7, 5)) < 0.6, 0.0, rng.standard_normal((3, 7, 5))).astype(np.float32)
    dense[1] = 0.0  # an all-zero model in the batch
    plan, parts = bcoo_from_dense(dense)
    assert plan.nse == max(1, max(np.count_nonzero(d) for d in dense))
    assert parts["data"].shape == (3, plan.nse) and parts["indices"].shape == (3, plan.nse, 2)
    v = rng.random(5).astype(np.float32)
    for k in range(3):
        one = {key: jnp.asarray(x[k]) for key, x in parts.items()}
        np.testing.assert_array_equal(np.asarray(bcoo_todense(plan, one)), dense[k])
        np.testing.assert_allclose(np.asarray(bcoo_matvec(plan, one, jnp.asarray(v))), dense[k] @ v, atol=FLOAT32_ATOL)


def test_bcoo_from_blocks_equals_block_diagonal_dense():
    """The sparse block-diagonal matrix is built from the blocks without the dense merge: same matrix."""
    rng = np.random.default_rng(5)
    arrays = _arrays(rng, ITEMS, b=2)
    plan = bd.block_diagonal_plan([m for m, _ in ITEMS], [lag for _, lag in ITEMS])
    r, c = plan.row_offsets, plan.col_offsets
    blocks = [a.reshape(2, m, -1) for a, (m, _) in zip(arrays, ITEMS)]
    bplan, parts = bcoo_from_blocks(blocks, [np.arange(r[i], r[i + 1]) for i in range(len(ITEMS))],
                                    [np.arange(c[i], c[i + 1]) for i in range(len(ITEMS))], plan.merged_shape)
    dense = bd.merge_arrays(plan, arrays)
    assert bplan.nse == max(np.count_nonzero(d) for d in dense)
    for k in range(2):
        one = {key: jnp.asarray(x[k]) for key, x in parts.items()}
        np.testing.assert_array_equal(np.asarray(bcoo_todense(bplan, one)), dense[k])


def test_axis_aligned_bcoo_is_the_padded_tensor():
    from bayes_infer_ros.inference.variants.hybrid import _axis_aligned_bcoo

    rng = np.random.default_rng(6)
    arrays = _arrays(rng, ITEMS, b=2)
    plan = aa.axis_aligned_plan([m for m, _ in ITEMS], [lag for _, lag in ITEMS])
    bplan, parts = _axis_aligned_bcoo(plan, arrays)
    merged = aa.merge_arrays(plan, arrays)  # (b, M, max m, *N)
    M, m_max = plan.num_items, plan.padded_lead
    P = int(np.prod(plan.padded_lagging))
    for k in range(2):
        one = {key: jnp.asarray(x[k]) for key, x in parts.items()}
        dense = np.asarray(bcoo_todense(bplan, one)).reshape(M, P, M, m_max)
        for i, j in itertools.product(range(M), range(M)):
            want = merged[k, i].reshape(m_max, P).T if i == j else 0.0
            np.testing.assert_array_equal(dense[i, :, j, :], want)


# ---- clustering -------------------------------------------------------------------------------------
def test_rank_clusters():
    assert rank_clusters([(4,), (2, 6), (7, 1, 3), (5,), (3, 9)]) == ((0, 3), (1, 4), (2,))


def test_elbow_index_rule():
    assert elbow_index([0]) == 0
    assert elbow_index([0, 10]) == 0                     # no bend: do not merge
    assert elbow_index([0, 1, 2, 3, 100]) == 3           # cheap merges, then one expensive
    assert elbow_index([0, 1, 2, 3, 4]) == 0             # linear: ties resolve to fewer merges
    assert elbow_index([0, 5, 10, 40, 80, 200]) == 3     # k*Z_K - K*Z_k = 0, 175, 350, 400, 400, 0: first max


def _brute_force_history(rows, cols):
    """Reference greedy: at every step the pair with the smallest added zeros (ties: smallest members)."""
    clusters = [([i], rows[i], cols[i]) for i in range(len(rows))]
    deltas = []
    while len(clusters) > 1:
        best = min(((ri * cj + rj * ci, a, b) for a, (_, ri, ci) in enumerate(clusters)
                    for b, (_, rj, cj) in enumerate(clusters) if a < b))
        d, a, b = best
        deltas.append(d)
        ma, ra, ca = clusters[a]
        mb, rb, cb = clusters.pop(b)
        clusters[a] = (sorted(ma + mb), ra + rb, ca + cb)
    return deltas


@pytest.mark.parametrize("seed", range(6))
def test_agglomerative_greedy_matches_brute_force_and_is_convex(seed):
    rng = np.random.default_rng(seed)
    M = int(rng.integers(1, 14))
    rows = [int(x) for x in rng.choice([2, 3, 4, 6, 8, 27, 64, 500, 3000], M)]
    cols = [int(x) for x in rng.integers(2, 12, M)]
    res = agglomerative_clusters(rows, cols)
    assert list(res.deltas) == _brute_force_history(rows, cols)
    assert all(d2 >= d1 for d1, d2 in zip(res.deltas, res.deltas[1:]))  # the curve is convex
    assert res.cumulative == tuple(int(x) for x in np.concatenate([[0], np.cumsum(res.deltas, dtype=np.int64)]))
    assert res.elbow == elbow_index(res.cumulative)
    assert sorted(i for c in res.clusters for i in c) == list(range(M))  # a partition
    assert len(res.clusters) == M - res.elbow
    # added zeros of the chosen clusters equal Z at the elbow
    added = sum(sum(rows[i] for i in c) * sum(cols[i] for i in c) - sum(rows[i] * cols[i] for i in c) for c in res.clusters)
    assert added == res.cumulative[res.elbow]
    assert agglomerative_clusters(rows, cols) == res  # deterministic


def test_agglomerative_groups_similar_small_blocks_and_keeps_big_apart():
    rows = [4] * 8 + [2000, 3000]
    cols = [3] * 8 + [10, 12]
    res = agglomerative_clusters(rows, cols)
    assert (0, 1, 2, 3, 4, 5, 6, 7) in res.clusters
    assert (8,) in res.clusters and (9,) in res.clusters
    assert agglomerative_clusters(rows, cols, num_merges=0).clusters == tuple((i,) for i in range(10))
    assert len(agglomerative_clusters(rows, cols, num_merges=9).clusters) == 1


# ---- parameter counts ------------------------------------------------------------------------------
def _structure():
    ns = (4, 2, 3, 2, 2, 2, 3)
    deps = ((0,), (1, 2), (0, 1, 2, 3, 4, 5, 6), (6,), (2, 4))
    nobs = (3, 5, 2, 4, 6)
    return ModelStructure(nobs, ns, (1,) * len(ns), deps, tuple((f,) for f in range(len(ns))))


def test_parameter_counts_match_prepared_arrays():
    st = _structure()
    rng = np.random.default_rng(7)
    A = []
    for i in range(st.num_modalities):
        a = rng.random((2,) + st.A_shape(i))
        a = np.where(rng.random(a.shape) < 0.3, 0.0, a)
        a[:, 0] += a.sum(1) == 0  # keep every column normalisable
        A.append(a / a.sum(1, keepdims=True))
    A[0][1, :, 0] = np.eye(st.num_obs[0])[0]  # A = 1 exactly: log A = 0 is not stored
    names = [v for v in PAPER_VARIANTS if "hybrid" in v]
    counts = parameter_counts(st, variants=["baseline"] + names, A=A)
    assert counts["unmerged"] == counts["baseline"] == sum(int(np.prod(st.A_shape(i))) for i in range(st.num_modalities))
    for name in names:
        cls = variant_ops(name)[0]
        ops, params = cls.prepare(st, A, np.float32)
        if cls.sparse:
            assert counts[name] == sum(g["data"].shape[1] for g in params["groups"])
            assert counts[name] <= counts["unmerged"]
        else:
            assert counts[name] == sum(int(np.prod(g.shape[1:])) for g in params["groups"])
            assert counts[name] >= counts["unmerged"]
    # structure only: no values, BCOO counts every real entry
    bare = parameter_counts(st, variants=names)
    assert bare["sparse_hybrid"] == bare["sparse_hybrid_block"] == bare["unmerged"]
    assert all(bare[n] == counts[n] for n in names if not variant_ops(n)[0].sparse)
    # a GenerativeModel (unbatched) gives the same as its structure plus values
    model = GenerativeModel(A=[a[0] for a in A], A_dependencies=st.A_dependencies)
    assert parameter_counts(model, variants=names) == parameter_counts(st, variants=names, A=[a[:1] for a in A])
