"""TickLoop of several agents (no ROS graph): three agents stepped together in one batched engine call equal three
single-agent TickLoops fed the same observations (by level and by label) and controls, for vmp (window, late
controls written onto their transition) and fpi; a refused observation of one agent is recorded for that agent
only."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from bayes_infer_ros.autotune import EngineConfig, engine_for
from bayes_infer_ros.model import load_model
from bayes_infer_ros.node.tick_loop import TickLoop
from tolerances import FLOAT32_ATOL

AGENTS = ("a", "b", "c")
S = 10**9


@pytest.fixture(scope="module")
def model(repo_root):
    return load_model(repo_root / "config" / "agent.yaml")


def _observe(inputs, rng, model, t):
    """One observation of each modality, every other one given by its label (the level left 0)."""
    for i, m in enumerate(model.num_obs):
        level = int(rng.integers(0, m))
        by_label = dict(level=0, label=model.observation_label_list(i)[level]) if (i + t) % 2 else dict(level=level)
        got = inputs.observe(i, probabilities=[], sec=t, nanosec=0, now=float(t), now_ns=t * S, arrival=0.0,
                             timeout_s=0.0, max_future_s=1e9, **by_label)
        assert got.ok


@pytest.mark.heavy
@pytest.mark.parametrize("algorithm", ["fpi", "vmp"])
def test_several_agents_equal_one_tick_loop_each(model, algorithm):
    config = EngineConfig(algorithm, "baseline", 8, 1.0, 3, 0)
    fleet = TickLoop(model, engine_for(model, dataclasses.replace(config, agents=len(AGENTS)), "baseline"), 3, AGENTS)
    single = engine_for(model, config, "baseline")
    alone = [TickLoop(model, single, 3) for _ in AGENTS]
    rng = np.random.default_rng(1)
    for t in range(1, 7):
        stepping = [k for k in range(len(AGENTS)) if rng.random() < 0.8] or [0]
        for k in stepping:
            seed = int(rng.integers(0, 2**31))
            _observe(fleet.agent_inputs[k], np.random.default_rng(seed), model, t)
            _observe(alone[k].agent_inputs[0], np.random.default_rng(seed), model, t)
            control = [int(rng.integers(0, u)) for u in model.num_controls]
            late = t > 1 and rng.random() >= 0.7
            stamp = t * S - 3 * S // 2 if late else t * S - S // 2  # some arrive late
            assert fleet.add_control(k, control, [], *divmod(stamp, S), now_ns=t * S) is None
            assert alone[k].add_control(0, control, [], *divmod(stamp, S), now_ns=t * S) is None
        outs = dict(fleet.step(t * S, stepping))
        assert sorted(outs) == stepping
        for k in stepping:
            [(_, want)] = alone[k].step(t * S, [0])
            np.testing.assert_allclose(outs[k].posterior, want.posterior, atol=FLOAT32_ATOL)
            assert outs[k].stamp_ns == want.stamp_ns


def test_a_control_stamp_is_judged_as_a_single_agents_is(model):
    """Not a time, or too far ahead of the node clock: refused by the fleet with the reason a TickLoop gives."""
    config = EngineConfig("fpi", "baseline", 8, 1.0, 1, 0)
    fleet = TickLoop(model, engine_for(model, dataclasses.replace(config, agents=len(AGENTS)), "baseline"), 1, AGENTS)
    alone = TickLoop(model, engine_for(model, config, "baseline"), 1)
    control = [0] * model.num_factors
    for sec, nanosec in ((-1, 0), (0, 2 * S), (5, 0)):
        want = alone.add_control(0, control, [], sec, nanosec, now_ns=S, max_future_s=0.5)
        assert want is not None
        assert fleet.add_control(1, control, [], sec, nanosec, now_ns=S, max_future_s=0.5) == want
    assert fleet.add_control(1, control, [], 1, 0, now_ns=S, max_future_s=0.5) is None


def test_a_refused_observation_is_its_agents_alone(model):
    config = EngineConfig("fpi", "baseline", 8, 1.0, 1, 0)
    fleet = TickLoop(model, engine_for(model, dataclasses.replace(config, agents=len(AGENTS)), "baseline"), 1, AGENTS)
    got = fleet.agent_inputs[2].observe(1, 99, [], 0, 0, now=1.0, now_ns=S, arrival=0.0, timeout_s=0.0,
                                        max_future_s=1.0)
    assert not got.ok
    rejected = {m.name: sum(m.rejected.values()) for m in fleet.modalities}
    assert rejected["c/voltage"] == 1 and sum(rejected.values()) == 1
    assert "a/voltage" in rejected and "b/rfid_tag" in rejected
