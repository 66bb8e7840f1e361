"""A verify step that measures another candidate faster swaps it in through the node's atomic engine swap, while the
tick keeps running (node/runtime.py, node/deployer.py, autotune/verification.py; no ROS). The running engine is a stub
that sleeps in every tick (engine_stubs.Slowed): a lower bound on its time that load cannot undo."""
import threading
import time
from pathlib import Path

import pytest

from bayes_infer_ros.autotune import decision as dec
from bayes_infer_ros.autotune import deployment as dep
from bayes_infer_ros.inference.native import numba_available
from bayes_infer_ros.node import runtime as runtime_module
from bayes_infer_ros.node.runtime import AgentRuntime
from bayes_infer_ros.node.settings import NodeSettings
from bayes_infer_ros.node.warmup import node_parameters
from engine_stubs import Slowed
from recording_log import RecordingLog

ROOT = Path(__file__).resolve().parents[2]
TICKS_DURING_THE_BUILD = 20


@pytest.mark.skipif(not numba_available(), reason="the start is fused_numba, verified against baseline")
def test_a_candidate_measured_faster_replaces_the_running_engine_without_stalling_the_tick(monkeypatch):
    real = dep.engine_for
    building, release = threading.Event(), threading.Event()

    def build(m, config, variant, device=None, budget=None):
        engine = real(m, config, variant, device, budget)
        if variant == "fused_numba":
            return Slowed(engine, 0.003)  # the start: runs, but measures slower than baseline
        if threading.current_thread().name == "engine_build":  # the node's build of the winner: held open
            building.set()
            assert release.wait(120), "the test never released the build"
        return engine

    monkeypatch.setattr(dep, "engine_for", build)
    real_deployer = runtime_module.Deployer  # the stubs live in this process: it verifies there
    monkeypatch.setattr(runtime_module, "Deployer", lambda *a, **k: real_deployer(*a, **k, verify_in_process=True))
    values = node_parameters(ROOT / "config" / "agent.yaml")  # fpi, variant auto: fused_numba starts
    values.update(device="cpu", jax_compilation_cache_dir="", rate_hz=100.0, tick_without_observations=True)
    settings = NodeSettings.from_values(values)
    log, ticks = RecordingLog(), []
    runtime = AgentRuntime(settings, log, time.time_ns, lambda: False,
                           lambda k, out, deployment, loop: ticks.append(deployment.variant))
    slot = runtime.configure(settings, 0.05, lambda: True, lambda back: None)
    runtime.verify()
    assert slot.variant == "fused_numba" and slot.plan.verify == (dec.Candidate("cpu", "baseline"),), slot.note
    runtime.activate()
    stop, errors = threading.Event(), []

    def tick() -> None:
        while not stop.is_set():
            try:
                runtime.tick()
            except Exception as exc:  # noqa: BLE001 - the assertion below names it
                errors.append(exc)
                return
            time.sleep(0.001)

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        assert building.wait(120), log.lines
        during = len(ticks)
        assert _wait(lambda: len(ticks) >= during + TICKS_DURING_THE_BUILD, 60), "the tick stalled during the build"
        assert set(ticks) == {"fused_numba"}  # the start ran while the winner was built
        release.set()
        assert _wait(lambda: runtime.deployment.variant == "baseline" and ticks[-1] == "baseline", 60), log.lines
    finally:
        release.set()
        stop.set()
        ticker.join(10)
        runtime.cleanup("test over")
    assert errors == [] and runtime.reporter.counters.get("tick_errors", 0) == 0
    assert ticks.index("baseline") >= during + TICKS_DURING_THE_BUILD
    assert set(ticks[ticks.index("baseline"):]) == {"baseline"}  # one atomic swap, never back
    counters = runtime.reporter.counters
    assert counters["engine_swaps"] == 1 and counters["verify_swaps"] == 1
    outcome = [m for kind, m in log.lines if m.startswith("swaps to baseline@cpu")]
    assert len(outcome) == 1 and "fused_numba@cpu" in outcome[0] and "; timed here: " in outcome[0]


def _wait(predicate, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()
