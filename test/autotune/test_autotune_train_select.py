"""Training (paper protocol, tiny search), the numpy evaluator, regret, and select_variant's guarantees."""
import json

import jax
import numpy as np
import pytest

from bayes_infer_ros.autotune import decision as dec
from bayes_infer_ros.autotune import deployment as dep
from bayes_infer_ros.autotune import devices
from bayes_infer_ros.autotune import select as sel
from bayes_infer_ros.autotune.select import MemoryBudget, NumpyForest
from lab import train_autotuner as tr
from lab import generator as g
from lab import harness as h
from engine_stubs import Slowed
from synthetic_rows import synthetic_rows
from tolerances import FLOAT32_ATOL, FLOAT64_BOOKKEEPING_ATOL


def test_numpy_forest_matches_xgboost(tmp_path):
    xgb = pytest.importorskip("xgboost")
    rng = np.random.default_rng(0)
    X = rng.random((60, 7)).astype(np.float32)
    y = (X[:, 0] * 3).astype(int)
    model = xgb.XGBClassifier(n_estimators=30, max_depth=4, subsample=0.8, n_jobs=1, random_state=0)
    model.fit(X, y)
    model.save_model(tmp_path / "m.json")
    forest = NumpyForest.load(tmp_path / "m.json")
    Xt = rng.random((25, 7)).astype(np.float32)
    Xt[0, 2] = np.nan  # missing values follow default_left
    np.testing.assert_allclose(forest.predict_proba(Xt), model.predict_proba(Xt), atol=FLOAT32_ATOL)


def test_choose_regret_and_verify():
    L = np.array([[1.0, 2.0, np.nan], [3.0, 1.0, 1.5]])
    scores = np.array([[0.1, 0.2, 0.7], [0.6, 0.1, 0.3]])
    chosen = tr.choose(scores, L)  # the top class of row 0 did not run: next one
    assert chosen.tolist() == [1, 0]
    np.testing.assert_allclose(tr.regrets(L, chosen), [1.0, 2.0])
    verify = tr.choose_verify(scores, L, k=2)
    assert verify.tolist() == [0, 2]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("models")
    specs = h.stratified_subset(g.generate_specs(), 1, seed=0)
    csv_path = out / "bench.csv"
    h.write_rows(csv_path, synthetic_rows(specs, algorithms=("fpi", "vmp")))
    rc = tr.main([str(csv_path), "--out-dir", str(out), "--report-dir", str(out), "--n-iter", "2",
                  "--folds", "2", "--classifiers", "xgboost"])
    assert rc == 0
    return out


@pytest.mark.heavy
def test_training_writes_models_meta_and_training_csv(trained):
    meta = json.loads((trained / "cpu_meta.json").read_text())
    assert meta["feature_names"] == sel.feature_names()
    assert set(meta["algorithms"]) == {"fpi", "vmp"}
    for alg, entry in meta["algorithms"].items():
        assert 0.0 <= entry["regret_xgboost"] and entry["regret_xgboost_verify3"] <= entry["regret_xgboost"] + FLOAT64_BOOKKEEPING_ATOL
        assert entry["regret_xgboost_noguard"] >= 0.0
        guard = entry["size_guard"]
        assert set(guard["ceilings"]) == set(entry["variants"]) - {"baseline"} and guard["margin"] > 1
    assert (trained / "autotune_cv_cpu.csv").is_file() and (trained / "autotune_regret_cpu.md").is_file()
    # the shipped training CSV is itself a training input
    ds = tr.read_training_csv(trained / "autotune_training_cpu.csv")
    assert set(ds) == {"fpi", "vmp"} and ds["fpi"].X.shape[1] == len(sel.feature_names())


@pytest.mark.heavy
def test_select_variant_is_fast_feasible_and_falls_back(trained, monkeypatch):
    monkeypatch.setattr(sel, "_registered", lambda: ("baseline", "hybrid", "clustered_hybrid", "hybrid_block",
                                                     "clustered_hybrid_block"))
    spec = g.generate_specs()[123]
    name = dep.select_variant("vmp", spec, horizon=5, model_dir=trained)
    assert name in sel._registered()
    # milliseconds by construction: without verify_top_k nothing is built or compiled (its time is a benchmark:
    # benchmarks/verify_cost.py prints the ranking's)
    monkeypatch.setattr(dep, "engine_for", lambda *a, **k: pytest.fail("select_variant built an engine"))
    monkeypatch.setattr(dep, "time_round_robin", lambda *a, **k: pytest.fail("select_variant timed something"))
    assert dep.select_variant("vmp", spec, horizon=5, model_dir=trained) == name
    # nothing fits a tiny budget except the baseline, which runs every model
    assert dep.select_variant("vmp", spec, horizon=5, model_dir=trained, memory_budget=MemoryBudget(1)) == "baseline"
    # no trained model at all
    assert dep.select_variant("mmp", spec, horizon=5, model_dir=trained / "nowhere") == "baseline"
    # a variant the classifier likes but that is not registered is never returned
    monkeypatch.setattr(sel, "_registered", lambda: ("baseline",))
    assert dep.select_variant("fpi", spec, model_dir=trained) == "baseline"


def test_shipped_models_load():
    """The models shipped in the package use the current feature set and name registered variants."""
    meta_path = sel.DEFAULT_MODEL_DIR / "cpu_meta.json"
    if not meta_path.is_file():
        pytest.skip("no shipped CPU model yet")
    meta = json.loads(meta_path.read_text())
    assert meta["feature_names"] == sel.feature_names()
    spec = g.generate_specs()[10]
    for alg in meta["algorithms"]:
        assert dep.select_variant(alg, spec, horizon=5) in sel._registered()


def test_without_numba_the_portable_model_ranks_and_the_native_engine_is_never_offered(monkeypatch):
    """Where numba is not installed, select_variant reads the model trained without the native variants
    (``cpu_portable``: a real ranking of the JAX variants) and never offers ``fused_numba``."""
    if not (sel.DEFAULT_MODEL_DIR / "cpu_portable_meta.json").is_file():
        pytest.fail("the package ships no cpu_portable model: `python -m lab autotune-train ... --exclude fused_numba "
                    "--tag cpu_portable`")
    portable = json.loads((sel.DEFAULT_MODEL_DIR / "cpu_portable_meta.json").read_text())
    assert all("fused_numba" not in e["variants"] for e in portable["algorithms"].values())
    assert sel._tags("cpu") == ("cpu",) or not sel.numba_available()
    monkeypatch.setattr(sel, "numba_available", lambda: False)
    assert sel._tags("cpu") == ("cpu_portable", "cpu")
    spec = g.generate_specs()[10]
    for alg in ("fpi", "vmp", "mmp"):
        ranked = [v for v, _ in sel.rank_variants(alg, spec, horizon=5)]
        assert "fused_numba" not in ranked and "baseline" in ranked, ranked
        assert len(ranked) >= 2, ranked  # a ranking of the JAX variants, not baseline alone
        assert dep.select_variant(alg, spec, horizon=5) != "fused_numba"


@pytest.mark.heavy
def test_verify_builds_and_times_candidates():
    """The verify step on real engines: every candidate that runs is timed, a refusal is reported with its reason,
    and the engines built are handed back."""
    spec = min(g.generate_specs(), key=lambda s: sum(s.a_elements()))
    model = g.build_model(spec)
    config = dec.EngineConfig("vmp", num_iter=4, horizon=3)
    found = devices.Devices({"cpu": jax.devices("cpu")[0]})
    timed = [dec.Candidate("cpu", v) for v in ("baseline", "hybrid_block", "no_such_variant")]
    engines = {}
    timings, errors = dep.verify_candidates(model, config, timed, found, engines=engines)
    assert set(timings) == set(engines) == {"baseline@cpu", "hybrid_block@cpu"}
    assert list(errors) == ["no_such_variant@cpu"] and "no_such_variant" in errors["no_such_variant@cpu"]
    assert all(t.time_s <= t.median_s <= t.p90_s and t.rounds >= 5 for t in timings.values())
    assert dep.verify_candidates(model, config, timed[2:], found) == ({}, {"no_such_variant@cpu": errors[
        "no_such_variant@cpu"]})


@pytest.mark.heavy
def test_verify_never_picks_a_variant_measured_slower_than_baseline(tmp_path, monkeypatch):
    """The prediction is wrong (it names a variant that runs slower here): the verify step times baseline as
    well and returns it. A sleep is a lower bound on the slowed variant's time, so load cannot flip this."""
    spec = min(g.generate_specs(), key=lambda s: sum(s.a_elements()))
    model = g.build_model(spec)
    meta = {"feature_names": sel.feature_names(), "algorithms": {"fpi": {"constant": "hybrid",
                                                                         "variants": ["hybrid", "fused_numba"]}}}
    (tmp_path / "cpu_meta.json").write_text(json.dumps(meta))
    real_build = dep.engine_for

    def build(model, config, variant, device=None, budget=None):
        engine = real_build(model, config, variant, device, budget)
        return Slowed(engine, 0.02) if variant == "hybrid" else engine

    monkeypatch.setattr(dep, "engine_for", build)
    assert dep.select_variant("fpi", model, model_dir=tmp_path) == "hybrid"  # the prediction alone
    assert dep.select_variant("fpi", model, model_dir=tmp_path, verify_top_k=3) == "baseline"


def test_tie_labels_group_variants_within_the_tolerance():
    variants = ["baseline", "a", "b"]
    L = np.array([[1.00, 0.98, 2.0],    # a and baseline tie -> baseline (first among equals)
                  [2.00, 1.00, 1.02],   # a and b tie; a is more often tied over all rows -> a
                  [2.00, 1.30, 1.00],   # b alone
                  [np.nan, 1.0, 1.01]])  # baseline did not run
    assert tr.tie_labels(L, variants, tol=0.05).tolist() == [0, 1, 2, 1]
    assert tr.tie_labels(L, variants, tol=0.0).tolist() == [1, 1, 2, 1]


def test_cost_weights_grow_with_what_a_miss_costs():
    L = np.array([[1.0, 1.01, 1.02], [1.0, 3.0, 1e6]])
    w = tr.cost_weights(L)
    assert w[1] > w[0] > 0
    assert w[1] <= 0.05 + tr.MAX_COST_WEIGHT


def test_simulated_verify_always_includes_baseline():
    L = np.array([[1.0, 2.0, 3.0, 0.5]])
    scores = np.array([[0.0, 0.9, 0.8, 0.1]])  # baseline (column 0) ranked last, outside the top 2
    assert tr.choose_verify(scores, L, 2).tolist() == [1]
    assert tr.choose_verify(scores, L, 2, always=0).tolist() == [0]
