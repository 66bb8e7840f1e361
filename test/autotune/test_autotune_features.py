"""Structure features and size estimates: deterministic, fast, and right on hand-checked models."""
import time
from types import SimpleNamespace

import numpy as np

from bayes_infer_ros.autotune import features as ft
from bayes_infer_ros.bench import generator as g


def _model(num_obs, num_states, deps):
    return SimpleNamespace(num_obs=num_obs, num_states=num_states, num_controls=(1,) * len(num_states),
                           A_dependencies=deps)


def test_size_estimates_by_hand():
    m = _model((3, 2), (4, 5), ((0,), (0, 1)))
    est = ft.size_estimates(m)
    assert est["baseline"] == 3 * 4 + 2 * 4 * 5
    assert est["hybrid"] == 2 * 3 * 4 * 5  # M x max m x per-axis maxima (axis 0: 4, axis 1: 5)
    assert est["end_to_end"] == 2 * 3 * 5 * 5  # global n_max on both lagging axes
    assert est["hybrid_block"] == (4 + 20) * (3 + 2)
    assert est["clustered_hybrid"] == 3 * 4 + 2 * 4 * 5  # one array per rank cluster: no padding
    assert est["sparse_hybrid"] == est["baseline"] * (1 + 2 + 2)


def test_agglomerative_merges_cheapest_pairs_and_stops_at_elbow():
    # three small blocks and one huge: the small ones merge, the huge one stays alone
    clusters, added = ft.agglomerative_blocks([2, 2, 2, 1000], [2, 2, 2, 50])
    assert sorted(map(sorted, clusters)) == [[0, 1, 2], [3]]
    assert added == 8 + 16  # 2*2+2*2, then (4*2 + 2*4)
    assert ft.elbow_index([0, 1, 2, 100]) == 2


def test_features_fixed_order_finite_and_fast():
    specs = g.generate_specs()
    names = ft.feature_names()
    big = max(specs, key=lambda s: s.M * 1000 + s.F)
    t0 = time.perf_counter()
    f = ft.structure_features(big, horizon=5, num_iter=16, backend="cpu")
    assert time.perf_counter() - t0 < 0.5
    assert list(f) == names
    assert all(np.isfinite(v) for v in f.values())
    v1 = ft.feature_vector(specs[5], 5, 16)
    model = g.build_model(specs[5])  # a GenerativeModel gives the same features as its spec
    np.testing.assert_array_equal(v1, ft.feature_vector(model, 5, 16))
    assert f["backend_cpu"] == 1.0 and f["horizon"] == 5.0
