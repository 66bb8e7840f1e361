"""The harness's sweep mechanics (resume, shard, memory skip, time limit, errors, merge) with a fake builder,
and one real case against pymdp."""
import argparse
import csv

import pytest

from lab import generator as g
from lab import harness as h
from tolerances import FLOAT32_ATOL


@pytest.fixture(scope="module")
def small_specs():
    specs = g.generate_specs()
    return sorted(specs, key=lambda s: sum(s.a_elements()))[:4]


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_shard_and_stratified(small_specs):
    items = list(range(10))
    assert h.shard(items, "0/3") == [0, 3, 6, 9]
    assert h.shard(items, "2/3") == [2, 5, 8]
    assert sorted(h.shard(items, "0/2") + h.shard(items, "1/2")) == items
    with pytest.raises(SystemExit):
        h.shard(items, "3/3")
    specs = g.generate_specs()
    sub = h.stratified_subset(specs, 2, seed=0)
    assert len(sub) == 40  # 10 (F, M) pairs x 2 regimes x 2
    assert sub == h.stratified_subset(specs, 2, seed=0)
    strata = [(s.F, s.M, s.regime) for s in sub]
    assert len(set(strata[:20])) == 20 and set(strata[:20]) == set(strata[20:])  # round-robin: any prefix is stratified


def test_ids_keep_the_given_order_and_unknown_ids_are_refused():
    specs = g.generate_specs()
    args = argparse.Namespace(ids=["c0704", "c0007", "c0345", "c0007"], max_total_a=None, min_total_a=None,
                              modalities=None, max_fm=None, exclude=None, per_stratum=None, limit=None, shard=None,
                              subset_seed=0)
    assert [s.config_id for s in h.select_configs(args, specs)] == ["c0704", "c0007", "c0345"]
    args.shard = "1/2"
    assert [s.config_id for s in h.select_configs(args, specs)] == ["c0007"]
    args.ids = ["c0007", "c9999"]
    with pytest.raises(SystemExit, match="c9999"):
        h.select_configs(args, specs)


def test_the_scale_selection_one_per_stratum_of_the_given_m_above_a_size():
    """--modalities 25 125 --min-total-a 100000 --per-stratum 1: one configuration of every such stratum, each at
    least that large."""
    specs = g.generate_specs()
    args = argparse.Namespace(ids=None, max_total_a=None, min_total_a=100_000, modalities=[25, 125], max_fm=None,
                              exclude=None, per_stratum=1, limit=None, shard=None, subset_seed=0)
    chosen = h.select_configs(args, specs)
    strata = {(s.F, s.M, s.regime) for s in specs if s.M in (25, 125) and sum(s.a_elements()) >= 100_000}
    assert sorted((s.F, s.M, s.regime) for s in chosen) == sorted(strata)
    assert all(s.M in (25, 125) and sum(s.a_elements()) >= 100_000 for s in chosen)


@pytest.mark.heavy
def test_sweep_records_resumes_skips_and_limits(small_specs, tmp_path):
    out = tmp_path / "sweep.csv"
    settings = h.Settings(cache=str(tmp_path / "cache"), builder="fake_variants:build", rounds=3, max_time_s=0.05)
    specs = small_specs[:2]
    variants = ["fast", "refuses", "broken"]
    counts = h.run_sweep(specs, out, algorithms=["fpi", "vmp"], variants=variants,
                         settings=settings, limits=h.SweepLimits(case_time_limit=30), progress=False, include_pymdp=False)
    assert counts == {"resumed": 0, "ok": 4, "unsupported": 4, "error": 4}
    # a case over the limit kills the worker and is recorded; the group's other cases run again on their own
    counts = h.run_sweep(specs[:1], out, algorithms=["fpi"], variants=["sleepy", "fast"], settings=settings,
                         limits=h.SweepLimits(case_time_limit=3), progress=False, include_pymdp=False)
    assert counts == {"resumed": 0, "timeout": 1, "ok": 1}
    rows = h.read_rows([out])  # the rerun "fast" row replaces the first one
    assert len(rows) == 2 * 2 * 3 + 1 and len(_rows(out)) == len(rows) + 1
    by = {(r["config_id"], r["algorithm"], r["variant"]): r for r in rows}
    first = specs[0].config_id
    assert by[(first, "fpi", "fast")]["status"] == "ok"
    assert by[(first, "fpi", "fast")]["timing"] == "round_robin_with_pymdp_only"
    assert by[(first, "vmp", "fast")]["timing"] == "round_robin"
    assert float(by[(first, "vmp", "fast")]["repeats"]) == 3  # rounds
    assert float(by[(first, "fpi", "fast")]["median_s"]) > 0
    assert float(by[(first, "fpi", "fast")]["packed_median_s"]) > 0
    assert by[(first, "fpi", "refuses")]["status"] == "unsupported"
    assert by[(first, "fpi", "broken")]["status"] == "error"
    assert by[(first, "fpi", "sleepy")]["status"] == "timeout"
    for r in rows:  # every row carries the environment and load
        for col in ("machine", "jax", "jaxlib", "backend", "device", "dtype", "loadavg", "timestamp"):
            assert r[col] != "", col
    # resume: nothing left to do
    again = h.run_sweep(specs, out, algorithms=["fpi", "vmp"], variants=variants,
                        settings=settings, limits=h.SweepLimits(case_time_limit=30), progress=False, include_pymdp=False)
    assert again == {"resumed": 12}
    assert len(_rows(out)) == 14


def test_memory_budget_skips_before_building(small_specs, tmp_path):
    out = tmp_path / "mem.csv"
    settings = h.Settings(cache=None, builder="fake_variants:build")
    h.run_sweep(small_specs[:1], out, algorithms=["fpi"], variants=["end_to_end", "sleepy"], settings=settings,
                limits=h.SweepLimits(memory_budget_gb=1e-9), progress=False, include_pymdp=False)
    rows = _rows(out)
    assert {r["status"] for r in rows} == {"skipped_memory"}  # "sleepy" was never built (no timeout)
    assert all("budget" in r["reason"] for r in rows)


def test_merge_shards(tmp_path):
    a, b, out = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "m.csv"
    base = {"algorithm": "fpi", "variant": "baseline", "horizon": 1, "num_iter": 16, "dtype": "float32",
            "backend": "cpu", "status": "ok"}
    h.write_rows(a, [{**base, "config_id": "c0", "median_s": 1}, {**base, "config_id": "c1", "median_s": 2}])
    h.write_rows(b, [{**base, "config_id": "c1", "median_s": 3}, {**base, "config_id": "c2", "median_s": 4}])
    assert h.main(["--merge", str(out), str(a), str(b)]) == 0
    rows = {r["config_id"]: r["median_s"] for r in _rows(out)}
    assert rows == {"c0": "1", "c1": "3", "c2": "4"}


@pytest.mark.heavy
@pytest.mark.oracle
def test_real_case_against_pymdp(small_specs, tmp_path):
    """pymdp and the baseline engine in one worker: both timed, results equal within float32 tolerance."""
    out = tmp_path / "real.csv"
    settings = h.Settings(cache=None, rounds=3, max_time_s=0.05, packed=False)
    h.run_sweep(small_specs[:1], out, algorithms=["vmp"], variants=["baseline"], settings=settings,
                progress=False)
    rows = {r["variant"]: r for r in _rows(out)}
    assert rows["pymdp"]["status"] == "ok" and rows["baseline"]["status"] == "ok", rows
    assert float(rows["baseline"]["max_abs_diff_vs_pymdp"]) < FLOAT32_ATOL
    assert float(rows["pymdp"]["compile_s"]) > 0 and float(rows["baseline"]["median_s"]) > 0
    assert rows["baseline"]["timing"] == "round_robin" and rows["pymdp"]["exec_mode"] != ""
    assert rows["baseline"]["exec_mode"] != ""  # the label of the program the list call runs


@pytest.mark.heavy
@pytest.mark.oracle
def test_auto_case_is_the_nodes_decision_timed_beside_the_variants(small_specs, tmp_path):
    """``auto`` runs ``autotune.decide`` (every device here, verify step on): its row names its pick, which is one of
    the candidates this machine has, and its result equals pymdp's."""
    out = tmp_path / "auto.csv"
    settings = h.Settings(cache=None, rounds=3, max_time_s=0.05, packed=False)
    h.run_sweep(small_specs[:1], out, algorithms=["fpi"], variants=["baseline", h.AUTO], settings=settings,
                progress=False)
    rows = {r["variant"]: r for r in _rows(out)}
    auto = rows[h.AUTO]
    assert auto["status"] == "ok", auto
    variant, _, platform = auto["reason"].removeprefix("chose ").partition("@")
    assert platform == "cpu" and variant in h.VARIANTS, auto["reason"]  # CI has no GPU
    assert float(auto["max_abs_diff_vs_pymdp"]) < FLOAT32_ATOL
    assert float(auto["median_s"]) > 0 and auto["timing"] == "round_robin"
