"""The verify step off the tick path (autotune/verification.py): a child process times the plan's candidates and
this process concludes; nothing is built here, a cancelled step never reports, a failed one keeps the start."""
from pathlib import Path

import pytest

from bayes_infer_ros.autotune import decision as dec
from bayes_infer_ros.autotune import deployment as dep
from bayes_infer_ros.autotune.select import MemoryBudget
from bayes_infer_ros.autotune.decision import DecisionCache
from bayes_infer_ros.model import load_model
from bayes_infer_ros.autotune.verification import Verification

ROOT = Path(__file__).resolve().parents[2]
BUDGET = MemoryBudget.from_mib(2048, "memory_budget_mb")
START, OTHER = dec.Candidate("cpu", "baseline"), dec.Candidate("cpu", "hybrid")


@pytest.fixture(scope="module")
def model():
    return load_model(ROOT / "config" / "agent.yaml")


def _plan(start=START, verify=(OTHER,), device="cpu", key="key"):
    return dec.Plan(dec.EngineConfig("fpi", device=device), start, tuple(verify), cache_key=key)


def test_a_child_process_times_the_candidates_and_this_process_builds_nothing(model, tmp_path, monkeypatch):
    monkeypatch.setattr(dep, "engine_for", lambda *a, **k: pytest.fail("the node built a candidate"))
    cache, reported = DecisionCache(tmp_path / "decisions"), []
    job = Verification(model, _plan(), reported.append, cache=cache, jax_cache_dir=str(tmp_path / "jax")).start()
    assert "verifying hybrid@cpu against baseline@cpu off the tick path (child process" in job.status
    outcome = job.wait(300)
    assert outcome is not None and reported == [outcome] and job.error == ""
    assert set(outcome.timings) == {"baseline@cpu", "hybrid@cpu"} and outcome.errors == {}
    fastest_other = outcome.timings["hybrid@cpu"]
    assert outcome.swap == dec.wins_beyond_noise(fastest_other, outcome.timings["baseline@cpu"])
    assert outcome.run == (OTHER if outcome.swap else START)
    assert cache.load("key")["variant"] == outcome.run.variant  # the next start runs it at once
    assert job.status == outcome.reason and "; timed here: " in outcome.reason
    assert any((tmp_path / "jax").iterdir()), "the child compiled into the node's JAX cache"
    assert job.pid is not None and not Path(f"/proc/{job.pid}").exists()  # the child has exited, and was reaped


def test_a_cancelled_verify_step_kills_its_child_and_never_reports(model):
    reported = []
    job = Verification(model, _plan(), reported.append).start()
    job.cancel()
    assert job.wait(60) is None and job.done and reported == []
    assert "cancelled" in job.status


def test_a_verify_step_that_fails_keeps_the_start_with_the_reason(model, tmp_path):
    """The child cannot find the devices it was asked for (device: gpu on a machine without one)."""
    reported = []
    cache = DecisionCache(tmp_path)
    job = Verification(model, _plan(device="gpu"), reported.append, cache=cache).start()
    outcome = job.wait(300)
    assert reported == [outcome] and outcome.run == START and not outcome.swap
    assert "the verify step failed" in outcome.reason and "DeviceUnavailable" in outcome.reason
    assert cache.load("key") is None  # nothing measured: the next start verifies again


def test_the_child_imports_this_package_not_the_working_directorys(model, tmp_path, monkeypatch):
    """Started from a folder that holds another ``bayes_infer_ros`` (a source tree: ``make demo`` runs in one), the
    child still imports the package this process did, whose numba kernel cache it shares. The decoy would fail the
    import; the real child gets as far as the device look-up that this plan makes fail."""
    decoy = tmp_path / "bayes_infer_ros"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise ImportError('the working directory decoy was imported')\n")
    monkeypatch.chdir(tmp_path)
    job = Verification(model, _plan(device="gpu"), lambda outcome: None).start()
    outcome = job.wait(300)
    assert outcome is not None and "DeviceUnavailable" in outcome.reason, outcome.reason
    assert "decoy" not in outcome.reason
