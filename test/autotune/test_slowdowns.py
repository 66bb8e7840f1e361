"""The predicted slowdown of a candidate against an install's start (autotune.slowdowns): the nearest training
models' smallest ratio, the structure points, and the tables training writes (the shipped ones included)."""
import json
import math

import numpy as np
import pytest

from bayes_infer_ros.autotune import select
from bayes_infer_ros.autotune.select import DEFAULT_MODEL_DIR, feature_names, structure_features
from lab import generator as g
from lab import train_autotuner as tr

ROOT = DEFAULT_MODEL_DIR.parents[2]


def _table(points, ratios):
    latencies = np.stack([np.ones(len(points)), np.asarray(ratios, dtype=float)], axis=1)
    return select.slowdown_table(np.asarray(points, dtype=float), latencies, ["start", "other"], "start",
                           [f"c{i}" for i in range(len(points))])


def test_the_prediction_is_the_smallest_ratio_among_the_nearest_training_models(monkeypatch):
    table = _table([[0, 0, 0], [0, 0, 1], [0, 0, 2], [0, 0, 10], [0, 0, 11]], [5.0, 3.0, 4.0, 1.1, 1.2])
    monkeypatch.setattr(select, "structure_point", lambda model: (0.0, 0.0, 0.4))
    near_small = select.predict_slowdown(table, object(), "other")
    assert near_small.nearest == ("c0", "c1", "c2") and near_small.ratio == 3.0 and near_small.wide
    assert "3x slower than start" in near_small.describe() and "c0, c1, c2" in near_small.describe()
    monkeypatch.setattr(select, "structure_point", lambda model: (0.0, 0.0, 10.6))
    near_large = select.predict_slowdown(table, object(), "other")
    assert set(near_large.nearest) == {"c2", "c3", "c4"} and near_large.ratio == 1.1 and not near_large.wide
    assert select.predict_slowdown(table, object(), "unknown") is None
    assert select.predict_slowdown(None, object(), "other") is None


def test_a_variant_that_ran_on_too_few_training_models_has_no_prediction(monkeypatch):
    table = _table([[0, 0, 0], [0, 0, 1], [0, 0, 2]], [5.0, np.nan, 4.0])
    assert table["ratios"]["other"][1] is None  # JSON has no NaN
    monkeypatch.setattr(select, "structure_point", lambda model: (0.0, 0.0, 0.0))
    assert select.predict_slowdown(table, object(), "other") is None


def test_structure_points_match_the_training_features():
    specs = g.generate_specs()[::97]
    names = feature_names()
    X = np.array([[structure_features(s)[k] for k in names] for s in specs])
    np.testing.assert_allclose(select.points_from_features(X, names),
                               [select.structure_point(s) for s in specs], rtol=1e-12)
    assert select.structure_point(specs[0])[0] == pytest.approx(math.log(len(specs[0].num_obs)))


def test_the_shipped_tables_are_what_training_writes_from_the_shipped_training_csv(tmp_path):
    datasets = tr.read_training_csv(ROOT / "benchmarks" / "autotune_training_cpu.csv")
    settings = tr.TrainingSettings(n_iter=1, folds=2, seed=0, top_k=3, classifiers=["xgboost"])
    summary = tr.train_all(datasets, tmp_path, None, settings, tag="cpu", log=lambda *a, **k: None)
    shipped = json.loads((DEFAULT_MODEL_DIR / "cpu_meta.json").read_text())
    for alg, entry in summary["algorithms"].items():
        assert entry["constant"] == "fused_numba"
        assert entry["slowdowns"] == shipped["algorithms"][alg]["slowdowns"]
        assert entry["slowdowns"]["reference"] == "fused_numba" and "baseline" in entry["slowdowns"]["ratios"]
