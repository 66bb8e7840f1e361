"""Structure features and size estimates: deterministic, complete, and the variants' real plans."""
import math
from types import SimpleNamespace

import jax
import numpy as np
import pytest

from bayes_infer_ros.autotune import select as ft
from lab import generator as g
from bayes_infer_ros.inference import VARIANTS, VariantUnsupported, variant_ops
from bayes_infer_ros.inference.registry import NATIVE_VARIANTS
from bayes_infer_ros.model.generative_model import ModelStructure, trivial_B_dependencies

# fused_numba and fused_cuda keep log A unmerged in numba buffers, not JAX params (counted in test_sizes).
JAX_VARIANTS = tuple(v for v in VARIANTS if v not in NATIVE_VARIANTS)


def _model(num_obs, num_states, deps):
    return SimpleNamespace(num_obs=num_obs, num_states=num_states, num_controls=(1,) * len(num_states),
                           A_dependencies=deps)


def _random_structure(rng, M):
    F = int(rng.integers(1, 5))
    ns = tuple(int(x) for x in rng.integers(2, 5, size=F))
    deps = tuple(tuple(sorted(rng.choice(F, size=int(rng.integers(1, F + 1)), replace=False).tolist())) for _ in range(M))
    nobs = tuple(int(x) for x in rng.integers(2, 6, size=M))
    return ModelStructure(nobs, ns, (1,) * F, deps, trivial_B_dependencies(F))


def _prepared_elements(name, structure, rng):
    """Floating-point elements of the variant's prepared likelihood arrays for one model (None: refused)."""
    A = []
    for i in range(structure.num_modalities):
        a = rng.random((1,) + structure.A_shape(i)) + 0.1  # no entry is 1: log A has no zero
        A.append(a / a.sum(axis=1, keepdims=True))
    try:
        ops, params = variant_ops(name)[0].prepare(structure, A, np.float32)
    except VariantUnsupported:
        return None, None
    leaves = [x for x in jax.tree_util.tree_leaves(params) if np.issubdtype(np.asarray(x).dtype, np.floating)]
    return ops, sum(int(np.size(x)) for x in leaves)


def test_size_estimates_by_hand():
    m = _model((3, 2), (4, 5), ((0,), (0, 1)))
    est = ft.size_estimates(m)
    assert est["baseline"] == 3 * 4 + 2 * 4 * 5
    assert est["hybrid"] == 2 * 3 * 5 * 4  # M x max m x per-axis maxima of the size-sorted axes (5, then 4)
    assert est["end_to_end"] == 2 * 3 * 5 * 5  # global n_max on both lagging axes
    assert est["hybrid_block"] == (4 + 20) * (3 + 2)
    assert est["clustered_hybrid"] == 3 * 4 + 2 * 4 * 5  # one array per rank cluster: no padding
    assert est["sparse_hybrid"] == est["baseline"]  # BCOO: the nse stored values, every real entry
    # two blocks: the elbow keeps them apart, as the variant does
    assert est["clustered_hybrid_block"] == est["baseline"] and est["_num_block_clusters"] == 2


@pytest.mark.parametrize("seed", range(6))
def test_size_estimates_are_the_variants_plans(seed):
    """Every size the features use equals the prepared arrays of the variant's real build, on random
    structures with two modalities (two blocks: a curve with no bend, the elbow keeps them apart) and more."""
    rng = np.random.default_rng(100 + seed)
    for M in (2, 2, int(rng.integers(3, 8))):
        structure = _random_structure(rng, M)
        est = ft.size_estimates(structure)
        assert set(VARIANTS) <= set(est)
        feats = ft.structure_features(structure)
        for name in JAX_VARIANTS:
            ops, prepared = _prepared_elements(name, structure, rng)
            if ops is None:
                continue
            assert est[name] == prepared, (name, structure)
            if name == "clustered_hybrid":
                assert feats["num_rank_clusters"] == est["_num_rank_clusters"] == len(ops.groups)
            if name == "clustered_hybrid_block":
                assert feats["num_block_clusters"] == est["_num_block_clusters"] == len(ops.groups)
            if f"log_size_{name}" in feats:
                assert feats[f"log_size_{name}"] == math.log10(max(est[name], 1))
        assert est["fused_numba"] == est["baseline"] == est["unmerged"]


@pytest.mark.heavy
def test_peak_covers_the_stored_arrays():
    spec = g.generate_specs()[7]
    est = ft.size_estimates(spec)
    for name in VARIANTS:
        assert ft.peak_elements(name, est) >= 2 * est[name]


def test_features_fixed_order_and_finite():
    specs = g.generate_specs()
    names = ft.feature_names()
    big = max(specs, key=lambda s: s.M * 1000 + s.F)
    f = ft.structure_features(big, horizon=5, num_iter=16, backend="cpu")
    assert list(f) == names
    assert all(np.isfinite(v) for v in f.values())
    v1 = ft.feature_vector(specs[5], 5, 16)
    model = g.build_model(specs[5])  # a GenerativeModel gives the same features as its spec
    np.testing.assert_array_equal(v1, ft.feature_vector(model, 5, 16))
    assert f["backend_cpu"] == 1.0 and f["horizon"] == 5.0
