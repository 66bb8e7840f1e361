"""Reports: ratios, the summary table (median, p5, max) and the plots, from synthetic rows."""
import math

import pytest

from lab import generator as g
from lab import harness as h
from lab import report as r
from synthetic_rows import synthetic_rows


@pytest.fixture(scope="module")
def rows():
    specs = h.stratified_subset(g.generate_specs(), 1, seed=0)
    return synthetic_rows(specs)


def test_ratios_are_pymdp_over_variant(rows):
    lat, _, status = r.latency_tables(rows)
    rat = r.ratios(lat, {})
    cfg = next(iter(lat["fpi"]))
    expect = lat["fpi"][cfg]["pymdp"] / lat["fpi"][cfg]["hybrid"]
    assert any(math.isclose(x, expect) for x in rat["fpi"]["hybrid"])
    summary = {(s["algorithm"], s["variant"]): s for s in r.summary_rows(rat, status)}
    s = summary[("fpi", "baseline")]
    assert s["p5_ratio"] <= s["median_ratio"] <= s["max_ratio"]
    assert s["configs"] == 20


@pytest.mark.heavy
def test_autotuner_is_last_and_report_files(rows, tmp_path):
    csv_path = tmp_path / "sweep.csv"
    h.write_rows(csv_path, rows)
    choices = tmp_path / "cv.csv"
    cfgs = sorted({x["config_id"] for x in rows})
    choices.write_text("config_id,algorithm,xgboost,xgboost_verify\n"
                       + "".join(f"{c},{a},hybrid,clustered_hybrid\n" for c in cfgs for a in ("fpi", "vmp", "mmp")))
    summary = r.run_report([csv_path], tmp_path, "test", autotune_choices=choices)
    names = [s["variant"] for s in summary if s["algorithm"] == "fpi"]
    assert names[-2:] == [r.AUTOTUNER, r.AUTOTUNER_VERIFY]
    for f in ("violin_test.png", "params_vs_latency_test.png", "summary_test.csv", "summary_test.md"):
        assert (tmp_path / f).stat().st_size > 0
    assert "| median | p5 | max |" in (tmp_path / "summary_test.md").read_text()
