"""The soak benchmark (benchmarks/soak.py): a short smoke run by default, the full 100,000 ticks when slow."""
from __future__ import annotations

import importlib.util
import json

import pytest

pytestmark = pytest.mark.ros


def _soak_module(repo_root):
    spec = importlib.util.spec_from_file_location("soak_benchmark", repo_root / "benchmarks" / "soak.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_soak_smoke(ros_graph, repo_root, tmp_path):
    """1,000 ticks (5 passes over the bag, time kept increasing): every tick answered, no lockstep timeout,
    no reset or error in the node's log. Memory is only reported here (too short to judge growth)."""
    out = tmp_path / "soak.json"
    rc = _soak_module(repo_root).main(["--ticks", "1000", "--warmup-ticks", "200", "--rss-interval", "1",
                                       "--max-growth", "1.0", "--out", str(out)])
    report = json.loads(out.read_text())
    assert rc == 0, report
    assert report["ticks_received"] == 1000 and report["lockstep_timeouts"] == 0
    assert report["node_alive_at_end"] and report["node_log_errors"] == 0
    assert "resetting" not in out.with_suffix(".node.log").read_text()


@pytest.mark.slow
def test_soak_100k_ticks_memory_growth_under_5_percent(ros_graph, repo_root, tmp_path):
    out = tmp_path / "soak.json"
    rc = _soak_module(repo_root).main(["--ticks", "100000", "--out", str(out)])
    report = json.loads(out.read_text())
    assert rc == 0, {k: v for k, v in report.items() if k != "rss_samples"}
    assert report["ticks_received"] >= 100_000 and report["rss_growth"] < 0.05
