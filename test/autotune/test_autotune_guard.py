"""The size guard: padding from structure features, ceilings learned from latencies, and its use at selection."""
import json
import math
import shutil

import numpy as np
import pytest

from bayes_infer_ros.autotune import select as sel
from lab import train_autotuner as tr
from bayes_infer_ros.autotune.select import feature_vector, size_estimates
from lab import generator as g
from tolerances import FLOAT32_ATOL, FLOAT64_BOOKKEEPING_ATOL

VARIANTS = ["baseline", "hybrid", "end_to_end", "sparse_end_to_end"]


@pytest.fixture(scope="module")
def specs():
    return g.generate_specs()


def test_padding_matches_size_estimates(specs):
    """padding() reads log10(padded / dense) off the feature row; it agrees with the size estimates."""
    rng = np.random.default_rng()
    for spec in (specs[i] for i in rng.choice(len(specs), 8, replace=False)):
        est = size_estimates(spec)
        P = sel.padding(feature_vector(spec)[None], VARIANTS)[0]
        assert P[0] == 0.0
        np.testing.assert_allclose(P[1], max(math.log10(est["hybrid"] / est["baseline"]), 0), atol=FLOAT32_ATOL)
        np.testing.assert_allclose(P[2], max(math.log10(est["end_to_end"] / est["baseline"]), 0), atol=FLOAT32_ATOL)
        assert P[3] == P[2]  # the sparse variant pads like its dense layout
        # the fused family and the native engine do not pad: never dropped, whatever the model's size
        assert not sel.padding(feature_vector(spec)[None], ["fused_pairwise", "fused_numba"]).any()


def test_ceilings_and_allowed(specs):
    rng = np.random.default_rng()
    idx = rng.choice(len(specs), 40, replace=False)
    X = np.stack([feature_vector(specs[i]) for i in idx])
    P = sel.padding(X, VARIANTS)
    L = rng.uniform(1.0, 2.0, size=(len(X), len(VARIANTS)))
    L[:, 3] = np.nan  # never ran
    # end_to_end is the fastest exactly where its padding is at most the median padding
    cut = float(np.median(P[:, 2]))
    wins = P[:, 2] <= cut
    L[wins, 2] = 0.5
    L[~wins, 2] = 10.0
    ceilings = sel.fit_ceilings(X, L, VARIANTS)
    assert "baseline" not in ceilings and ceilings["sparse_end_to_end"] == 0.0
    assert ceilings["end_to_end"] == pytest.approx(P[wins, 2].max())
    ok = sel.guard_allowed(X, VARIANTS, ceilings)
    assert ok[:, 0].all()  # baseline is never dropped
    slack = math.log10(sel.GUARD_MARGIN) + FLOAT64_BOOKKEEPING_ATOL
    np.testing.assert_array_equal(ok[:, 2], P[:, 2] <= ceilings["end_to_end"] + slack)
    assert sel.guard_allowed(X, VARIANTS, None).all()


def test_choose_respects_the_guard_and_falls_back():
    L = np.array([[1.0, 5.0, 0.5], [2.0, 1.0, 3.0]])
    scores = np.array([[0.1, 0.8, 0.2], [0.2, 0.7, 0.1]])
    ok = np.array([[True, False, True], [False, False, False]])
    assert tr.choose(scores, L, ok).tolist() == [2, 1]  # row 1: nothing allowed -> every variant that ran
    assert tr.choose_verify(scores, L, 1, ok).tolist() == [2, 1]
    assert tr.choose_verify(scores, L, 2, ok).tolist() == [2, 1]


def test_select_variant_applies_the_shipped_guard(tmp_path, specs):
    """Ceilings below zero padding drop every padded variant: only baseline (never padded) stays."""
    meta_path = sel.DEFAULT_MODEL_DIR / "cpu_meta.json"
    if not meta_path.is_file():
        pytest.skip("no shipped CPU model")
    for f in sel.DEFAULT_MODEL_DIR.glob("cpu_*.json"):
        shutil.copy(f, tmp_path / f.name)
    meta = json.loads(meta_path.read_text())
    for entry in meta["algorithms"].values():
        assert set(entry["size_guard"]["ceilings"]) == set(entry["variants"]) - {"baseline"}
        entry["size_guard"]["ceilings"] = {v: -1.0 for v in entry["variants"] if v != "baseline"}
    (tmp_path / "cpu_meta.json").write_text(json.dumps(meta))
    sel._load.cache_clear()
    spec = specs[int(np.random.default_rng().integers(len(specs)))]
    for alg in meta["algorithms"]:
        ranked = sel.rank_variants(alg, spec, horizon=5, model_dir=tmp_path)
        assert [v for v, _ in ranked] == ["baseline"]
