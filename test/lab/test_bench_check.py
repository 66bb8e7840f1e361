"""The speed gate (``lab/bench_check.py``): its comparison against the committed baselines, and the gate itself
failing on a planted 2x slowdown of one call (each call followed by a spin as long as itself: its ratio doubles,
well past the 25% slack whatever the machine's load, since each ratio pairs the call with its bare kernel round by
round and the spin grows with a preempted call)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab import bench_check

ROOT = Path(__file__).resolve().parents[2]


def test_a_ratio_fails_only_past_its_baseline_times_the_slack():
    baselines = {"call.default": 1.5, "pymdp.fpi.c0000": 0.2}
    assert bench_check.compare({"call.default": 1.5 * 1.25, "pymdp.fpi.c0000": 0.1}, baselines, 1.25) == []
    failures = bench_check.compare({"call.default": 1.9, "pymdp.fpi.c0000": 0.2}, baselines, 1.25)
    assert failures == ["call.default: 1.900, over 1.500 x 1.25 = 1.875 (+27%)"]


def test_a_failing_ratio_is_measured_again_by_its_own_group():
    assert [bench_check.group_of(r) for r in ("call.default", "step_evidence.c0000", "node.default",
                                             "pymdp.mmp.c0060")] == ["call", "step", "node", "pymdp"]


def test_a_ratio_over_its_ceiling_once_is_measured_again_and_fails_only_twice(tmp_path, monkeypatch, capsys):
    base = tmp_path / "baselines.json"
    base.write_text(json.dumps({"ratios": {"call.default": 1.0, "pymdp.fpi.c0000": 0.1}}))
    draws = {"first": [1.5, 1.1], "twice": [1.5, 1.4]}
    for case, (first, second) in draws.items():
        seen = []

        def fake(only, models, plant, values=iter([first, second])):
            seen.append(list(only))
            return {"call.default": next(values), "pymdp.fpi.c0000": 0.1, "_bare_us": 4.0}

        monkeypatch.setattr(bench_check, "measure", fake)
        monkeypatch.setattr(bench_check, "_models", dict)
        code = bench_check.main(["--only", "call", "pymdp", "--baselines", str(base)])
        assert seen == [["call", "pymdp"], ["call"]], case  # only the failing group again
        assert code == (0 if case == "first" else 1), (case, capsys.readouterr())


def test_an_update_of_some_groups_keeps_the_others_baselines(tmp_path, monkeypatch):
    base = tmp_path / "baselines.json"
    base.write_text(json.dumps({"ratios": {"call.default": 1.0, "node.default": 7.0}}))
    draws = iter([1.2, 1.6, 1.3])
    monkeypatch.setattr(bench_check, "measure", lambda only, models, plant: {"call.default": next(draws)})
    monkeypatch.setattr(bench_check, "_models", dict)
    assert bench_check.main(["--update", "--only", "call", "--baselines", str(base)]) == 0
    record = json.loads(base.read_text())
    assert record["ratios"] == {"call.default": 1.3, "node.default": 7.0}  # the median of three
    assert record["groups"]["call"]["runs"] == 3 and "--only call" in record["groups"]["call"]["command"]
    assert "node" not in record["groups"]  # the old record said nothing of how node was measured


def test_an_update_keeps_how_the_other_groups_were_measured(tmp_path, monkeypatch):
    base = tmp_path / "baselines.json"
    base.write_text(json.dumps({"command": "python -m lab bench-check --update", "load": 0.5, "runs": 1,
                                "ratios": {"call.default": 1.0, "node.default": 7.0}}))
    monkeypatch.setattr(bench_check, "measure", lambda only, models, plant: {"node.default": 8.0})
    monkeypatch.setattr(bench_check, "_models", dict)
    assert bench_check.main(["--update", "--only", "node", "--runs", "1", "--baselines", str(base)]) == 0
    groups = json.loads(base.read_text())["groups"]
    assert groups["call"] == {"command": "python -m lab bench-check --update", "load": 0.5, "runs": 1}
    assert "--only node --runs 1" in groups["node"]["command"] and groups["node"]["runs"] == 1


def test_the_node_ratio_is_not_judged_only_on_a_host_that_wakes_far_slower_than_the_committed_figure():
    failure = ["node.default: 18.000, over 8.000 x 1.25 = 10.000 (+125%)"]
    slow_host = {"_wake_us.default": 3.1 * 40.0}
    assert "not judged" in bench_check.unjudged_node(failure, slow_host, 40.0)
    assert bench_check.unjudged_node(failure, {"_wake_us.default": 3.0 * 40.0}, 40.0) is None  # at the limit: judged
    assert bench_check.unjudged_node(failure, slow_host, None) is None  # no committed figure: judged
    assert bench_check.unjudged_node(["call.default: 3.000, over 1.000 x 1.25 = 1.250 (+200%)"], slow_host,
                                     40.0) is None  # only the node's ratio is ever set aside


def test_a_slow_host_sets_aside_the_node_ratio_and_nothing_else(tmp_path, monkeypatch, capsys):
    base = tmp_path / "baselines.json"
    base.write_text(json.dumps({"ratios": {"node.default": 8.0, "call.default": 1.0}}))
    monkeypatch.setattr(bench_check, "_models", dict)
    monkeypatch.setattr(bench_check, "wake_baseline_us", lambda: 40.0)
    for wake, call, code in ((500.0, 1.0, 0), (500.0, 2.0, 1), (45.0, 1.0, 1)):
        monkeypatch.setattr(bench_check, "measure", lambda only, models, plant, w=wake, c=call: {
            "node.default": 18.0, "call.default": c, "_wake_us.default": w})
        assert bench_check.main(["--only", "node", "call", "--baselines", str(base)]) == code, (wake, call)
        assert ("not judged" in capsys.readouterr().err) == (wake > 120.0)


def test_the_committed_wake_figure_is_read():
    assert 1.0 < bench_check.wake_baseline_us() < 1000.0


def test_the_committed_baselines_cover_every_ratio_the_gate_measures():
    ratios = json.loads(bench_check.BASELINES.read_text())["ratios"]
    models = ("default", bench_check.GENERATED[0])
    want = {f"{group}.{m}" for group in ("call", "step", "step_evidence") for m in models} | {"node.default"} | {
        f"pymdp.{a}.{cid}" for a in ("fpi", "vmp", "mmp") for cid in bench_check.GENERATED}
    assert set(ratios) == want and all(r > 0 for r in ratios.values())


def test_a_planted_slowdown_runs_the_call_once_and_takes_factor_times_as_long():
    calls = []

    def work():
        calls.append(1)
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 2e-3:
            pass
        return len(calls)

    slowed = bench_check.planted(work, 3.0)
    t0 = time.perf_counter()
    assert slowed() == 1 and len(calls) == 1
    assert time.perf_counter() - t0 >= 3 * 2e-3  # a lower bound: it holds however loaded the host is


@pytest.mark.heavy
def test_the_gate_fails_on_a_planted_2x_slowdown(tmp_path):
    """``--only call``: the list call's ratios alone (a few seconds); baselines at today's measurement."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    base = tmp_path / "baselines.json"
    cmd = [sys.executable, "-m", "lab", "bench-check", "--only", "call", "--baselines", str(base)]
    subprocess.run(cmd + ["--update", "--runs", "1"], cwd=ROOT, env=env, check=True, capture_output=True, text=True, timeout=600)
    planted = subprocess.run(cmd + ["--plant", "call.default=2"], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=600)
    assert planted.returncode == 1, planted.stdout + planted.stderr
    assert "bench-check FAILED: call.default:" in planted.stderr
    assert "measuring it once more" in planted.stdout  # a slowdown fails the second measurement too
    assert "call.c0000" not in planted.stderr  # the other model's call was not slowed
