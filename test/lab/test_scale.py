"""``python -m lab scale``: the one-call run's phases on a tiny subset (its CPU rehearsal; no timing asserted), and the
decisions it takes from the compile phase's rows."""
from __future__ import annotations

import csv
import os
import subprocess
import sys

import numpy as np

from lab import scale
from lab.generator import generate_specs

TINY = "c0002"  # F = 5, M = 5, 51 A elements: every phase runs, each compile takes about a second


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_rehearsal_runs_every_phase_and_writes_every_file(tmp_path, repo_root):
    """One tiny configuration, FPI, pymdp and two candidates (one native): the compile phase's rows, a round-robin
    row per candidate, the summary, both plots, the crossover table and the run's phase times."""
    out = tmp_path / "out"
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(repo_root))
    cmd = [sys.executable, "-m", "lab", "scale", "--out-dir", str(out), "--tag", "t", "--cache", str(tmp_path / "cfg"),
           "--work-dir", str(tmp_path / "work"), "--ids", TINY, "--algorithms", "fpi",
           "--variants", "fused_numba", "fused_pairwise", "--minutes", "6", "--compile-seconds", "240", "--jobs", "2",
           "--rounds", "5"]
    proc = subprocess.run(cmd, cwd=repo_root, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(f"{stem}_t.{ext}" for stem, ext in [
        ("compile", "csv"), ("sweep", "csv"), ("summary", "csv"), ("summary", "md"), ("violin", "png"),
        ("params_vs_latency", "png"), ("crossover", "md"), ("run", "txt")]), names
    compiled = _rows(out / "compile_t.csv")
    assert sorted(r["variant"] for r in compiled) == ["fused_numba", "fused_pairwise", "pymdp"]
    assert all(r["status"] == "ok" and float(r["first_call_s"]) > 0 for r in compiled)
    swept = {r["variant"]: r for r in _rows(out / "sweep_t.csv")}
    assert sorted(swept) == ["fused_numba", "fused_pairwise", "pymdp"]
    assert all(r["status"] == "ok" and float(r["time_s"]) > 0 for r in swept.values())
    assert float(swept["fused_pairwise"]["max_abs_diff_vs_pymdp"]) < 1e-4
    assert "crossover (fpi)" in (out / "crossover_t.md").read_text()
    phases = (out / "run_t.txt").read_text()
    assert all(f"{phase}: " in phases for phase in ("select", "compile", "time", "report"))


def test_candidates_without_a_finished_compile_are_skipped_with_the_reason():
    """A candidate whose first call has no row gets ``skipped_compile`` naming the phase's budget; a refusal keeps its
    status and reason; one whose second call took over the limit is ``skipped_time``; a compiled one is built (no
    entry)."""
    spec = generate_specs()[2]
    rows = [{"config_id": spec.config_id, "algorithm": "fpi", "variant": "pymdp", "status": "ok", "reason": "",
             "second_call_s": "0.01"},
            {"config_id": spec.config_id, "algorithm": "fpi", "variant": "end_to_end", "status": "unsupported",
             "reason": "VariantUnsupported: too large"},
            {"config_id": spec.config_id, "algorithm": "fpi", "variant": "fused_cuda", "status": "ok", "reason": "",
             "second_call_s": "30.5"}]
    got = scale.skips([spec], ["fpi"], ["end_to_end", "hybrid_block", "fused_cuda"], rows, 200, 6.0)
    assert set(got) == {(spec.config_id, "fpi", v) for v in ("end_to_end", "hybrid_block", "fused_cuda")}
    assert got[spec.config_id, "fpi", "fused_cuda"] == ("skipped_time", "one call took 30.5 s in the compile phase, "
                                                                        "over 6.0 s")
    assert got[spec.config_id, "fpi", "end_to_end"] == ("unsupported", "compile phase: VariantUnsupported: too large")
    status, reason = got[spec.config_id, "fpi", "hybrid_block"]
    assert status == "skipped_compile" and "200 s compile phase" in reason


def test_numpy_without_row_stack_gets_the_shim_on_the_path(monkeypatch):
    """numba-cuda needs numpy.row_stack (removed in numpy 2.5): the run's processes get lab/numpy_compat first on
    PYTHONPATH only where numpy lacks it, and its sitecustomize restores the name."""
    if hasattr(np, "row_stack"):
        assert str(scale.COMPAT) not in scale.numpy_compat_env({"PYTHONPATH": "x"})["PYTHONPATH"].split(os.pathsep)
    monkeypatch.delattr(np, "row_stack", raising=False)
    path = scale.numpy_compat_env({"PYTHONPATH": "x"})["PYTHONPATH"].split(os.pathsep)
    assert path[0] == str(scale.COMPAT) and path[-1] == "x"
    code = "import numpy; del numpy.row_stack; import importlib, sitecustomize; importlib.reload(sitecustomize); " \
           "print(numpy.row_stack is numpy.vstack)"
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(scale.COMPAT)),
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "True", out.stderr


def test_the_first_pass_compiles_the_headline_for_every_group_first():
    """compile_passes: the host kernel, the merged variant fastest on the H200 and pymdp first (only those asked
    for, pymdp always), the others after in the order given, auto last."""
    first, rest = scale.compile_passes(scale.DEFAULT_VARIANTS)
    assert first == ["fused_numba", "clustered_hybrid_block", "pymdp"]
    assert rest == ["fused_pairwise", "hybrid_block", "clustered_end_to_end", "fused_cuda", "auto"]
    assert scale.compile_passes(["auto", "fused_pairwise", "fused_numba"]) == (["fused_numba", "pymdp"],
                                                                              ["fused_pairwise", "auto"])
