"""A fleet node's configure (``agents``) waits for no tuning either: one plan, one batched engine of the start, and
the verify step's candidates left to run off the tick path on one agent's engines; nothing in it repeats per agent
(so configure grows at most linearly with the agents: the batched arrays themselves)."""
from __future__ import annotations

import pytest

from bayes_infer_ros.autotune import EngineConfig
from bayes_infer_ros.autotune import decision as dec
from bayes_infer_ros.autotune.decision_cache import DecisionCache
from bayes_infer_ros.model import load_model
from bayes_infer_ros.node import builder


@pytest.fixture(scope="module")
def model(repo_root):
    return load_model(repo_root / "config" / "agent.yaml")


@pytest.mark.parametrize("agents", [2, 8, 64])
def test_a_fleet_configure_builds_the_start_once_whatever_the_agents(model, monkeypatch, agents):
    plans, batched = [], []
    real_plan, real_batched = builder.plan_decision, builder.batched_engine
    monkeypatch.setattr(builder, "plan_decision", lambda *a, **k: plans.append(1) or real_plan(*a, **k))
    monkeypatch.setattr(builder, "batched_engine",
                        lambda m, c, variant, b, device=None: batched.append((variant, b)) or real_batched(
                            m, c, variant, b, device))
    monkeypatch.setattr(dec, "build_engine", lambda *a, **k: pytest.fail("configure built a one-agent candidate"))
    monkeypatch.setattr(dec, "time_round_robin", lambda *a, **k: pytest.fail("configure timed candidates"))
    monkeypatch.setattr(DecisionCache, "from_environment", classmethod(lambda cls: cls(None)))
    slot = builder.build_slot(model, EngineConfig("fpi", device="cpu"), 0, 2048.0, agents=agents)
    assert plans == [1] and batched == [(slot.variant, agents)]
    assert slot.plan.start.variant == slot.variant
    assert all(c.variant != slot.variant for c in slot.plan.verify)  # left for the verify step, off the tick path


def test_a_verified_swap_builds_the_winner_for_every_agent(model, monkeypatch):
    """The engine a verify step measured faster (on one agent's engines) is built batched, for the node's agents."""
    batched, real_batched = [], builder.batched_engine
    monkeypatch.setattr(builder, "batched_engine",
                        lambda m, c, variant, b, device=None: batched.append((variant, b)) or real_batched(
                            m, c, variant, b, device))
    config = EngineConfig("fpi", device="cpu")
    pin = builder.Pinned(config, dec.Candidate("cpu", "baseline"), "swaps to baseline@cpu: faster ...")
    slot = builder.build_slot(model, config, 1, 2048.0, agents=4, pin=pin)
    assert batched == [("baseline", 4)] and slot.variant == "baseline" and slot.plan.verify == ()
    assert "the verify step: swaps to baseline@cpu" in slot.note
