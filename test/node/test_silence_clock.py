"""The silence timeout runs on the node's clock (``silence_clock: node``, the default): under sim time a replay that
pauses for 10 s of wall time makes no sensor silent, while the host's clock (``silence_clock: wall``) would call
every one silent; the sim clock's first reading restarts every timeout (no warning for the time before /clock)."""
from __future__ import annotations

import time

import pytest

from bayes_infer_ros.node.runtime import AgentRuntime
from bayes_infer_ros.node.settings import NodeSettings
from recording_log import RecordingLog

S = 1_000_000_000


@pytest.fixture(scope="module")
def settings(repo_root):
    return NodeSettings(model_file=str(repo_root / "config" / "agent.yaml"), variant="baseline", device="cpu",
                        autotune_verify_top_k=0, jax_compilation_cache_dir="", evidence=False, use_sim_time=True,
                        observation_timeout=1.0)


def _runtime(settings: NodeSettings, clock: list[int]) -> tuple[AgentRuntime, RecordingLog]:
    log = RecordingLog()
    runtime = AgentRuntime(settings, log, lambda: clock[0], lambda: False, lambda *a: None)
    runtime.configure(settings, 0.05, lambda: True, lambda back: None)
    runtime.activate()
    return runtime, log


def _observe_every_modality(runtime: AgentRuntime, t_s: int) -> None:
    for i in range(runtime.model.num_modalities):
        runtime.observe(0, i, 0, [], t_s, 0)


@pytest.mark.heavy
@pytest.mark.parametrize("clock_name, silent", [("node", False), ("wall", True)])
def test_a_paused_replay_makes_no_sensor_silent_on_the_node_clock(settings, monkeypatch, clock_name, silent):
    clock = [0]  # sim time before the first /clock
    runtime, log = _runtime(settings.replace(silence_clock=clock_name), clock)
    try:
        clock[0] = 100 * S  # the bag's first /clock
        _observe_every_modality(runtime, 100)
        runtime.silence_check()
        assert not [line for _, line in log.lines if "silent" in line]  # nothing from the time before /clock
        wall = time.monotonic()
        monkeypatch.setattr(time, "monotonic", lambda: wall + 10.0)  # paused: 10 s of wall time, the sim clock stays
        runtime.silence_check()
        warned = [line for _, line in log.lines if "silent" in line]
        assert bool(warned) is silent, warned
        if not silent:  # the sim clock moves on past the timeout: now they are silent
            clock[0] = 102 * S
            runtime.silence_check()
            assert len([line for _, line in log.lines if "silent" in line]) == runtime.model.num_modalities
    finally:
        runtime.cleanup("test over")
