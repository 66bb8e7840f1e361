"""benchmarks/noise_floor.py: the regret of one run's winners under another run's timings."""
import csv
import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "noise_floor.py"
_spec = importlib.util.spec_from_file_location("noise_floor", _PATH)
noise_floor = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(noise_floor)


def _write(path, rows, stamp):
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["config_id", "algorithm", "variant", "status", "time_s",
                                           "timestamp", "loadavg"])
        w.writeheader()
        for cid, alg, var, t in rows:
            w.writerow({"config_id": cid, "algorithm": alg, "variant": var, "status": "ok", "time_s": t,
                        "timestamp": stamp, "loadavg": 1.0})


def test_regret_of_the_other_runs_winner(tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    # c1: the winners swap (A: x at 1.0; B: y at 1.0, x at 1.5); c2: same winner; pymdp rows are ignored
    _write(a, [("c1", "fpi", "x", 1.0), ("c1", "fpi", "y", 1.2), ("c2", "fpi", "x", 2.0), ("c2", "fpi", "y", 3.0),
               ("c1", "fpi", "pymdp", 0.1)], "t0")
    _write(b, [("c1", "fpi", "x", 1.5), ("c1", "fpi", "y", 1.0), ("c2", "fpi", "x", 2.0), ("c2", "fpi", "y", 3.0),
               ("c1", "fpi", "pymdp", 0.1)], "t1")
    r = noise_floor.compare(a, b)
    assert r["rows"] == 4 and r["pairs"] == 2 and r["same_winner"] == 0.5
    assert r["regret_a_in_b_mean"] == pytest.approx((0.5 + 0.0) / 2)
    assert r["regret_b_in_a_mean"] == pytest.approx((0.2 + 0.0) / 2)
    # rows with the same timestamp were not re-measured: nothing to compare
    with pytest.raises(SystemExit):
        noise_floor.compare(a, a)
