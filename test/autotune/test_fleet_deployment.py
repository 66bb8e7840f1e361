"""A fleet's deployment (``agents``) waits for no tuning either: one plan, one batched engine of the start, and the
verify step's candidates left to run off the tick path; nothing in it repeats per agent (so configure grows at most
linearly with the agents: the batched arrays themselves). The number of agents is part of the decision."""
from __future__ import annotations

import pytest

from bayes_infer_ros.autotune import EngineConfig, MemoryBudget
from bayes_infer_ros.autotune import decision as dec
from bayes_infer_ros.autotune import deployment as dep
from bayes_infer_ros.autotune.decision import DecisionCache
from bayes_infer_ros.model import load_model

BUDGET = MemoryBudget.from_mib(2048, "memory_budget_mb")


@pytest.fixture(scope="module")
def model(repo_root):
    return load_model(repo_root / "config" / "agent.yaml")


def _counting(monkeypatch):
    plans, built = [], []
    real_plan, real_engine = dep.plan_decision, dep.engine_for
    monkeypatch.setattr(dep, "plan_decision", lambda *a, **k: plans.append(1) or real_plan(*a, **k))
    monkeypatch.setattr(dep, "engine_for", lambda m, c, variant, device=None, budget=None: built.append(
        (variant, c.agents)) or real_engine(m, c, variant, device, budget))
    monkeypatch.setattr(dep, "time_round_robin", lambda *a, **k: pytest.fail("the deployment timed candidates"))
    monkeypatch.setattr(DecisionCache, "from_environment", classmethod(lambda cls: cls(None)))
    return plans, built


@pytest.mark.parametrize("agents", [2, 8, 64])
def test_a_fleet_deployment_builds_the_start_once_whatever_the_agents(model, monkeypatch, agents):
    plans, built = _counting(monkeypatch)
    deployment = dep.deploy(model, EngineConfig("fpi", device="cpu", agents=agents), BUDGET)
    assert plans == [1] and built == [(deployment.variant, agents)]
    assert deployment.engine.batch_size == agents
    assert deployment.plan.start.variant == deployment.variant
    assert all(c.variant != deployment.variant for c in deployment.plan.verify)  # left for the verify step


def test_a_verified_swap_builds_the_winner_for_every_agent(model, monkeypatch):
    """The engine a verify step measured faster is deployed batched, for the node's agents."""
    _, built = _counting(monkeypatch)
    config = EngineConfig("fpi", device="cpu", agents=4)
    pin = dec.Pinned(config, dec.Candidate("cpu", "baseline"), "swaps to baseline@cpu: faster ...")
    deployment = dep.deploy(model, config, BUDGET, pin=pin)
    assert built == [("baseline", 4)] and deployment.variant == "baseline" and deployment.plan.verify == ()
    assert "the verify step: swaps to baseline@cpu" in deployment.note


def test_the_decision_key_changes_with_the_number_of_agents(model, tmp_path):
    """The same model for one agent and for 1000: two decisions, each kept under its own key."""
    cache = DecisionCache(tmp_path)
    keys = {b: dec.plan_decision(model, EngineConfig("fpi", device="cpu", agents=b), BUDGET, cache=cache).cache_key
            for b in (1, 1000)}
    assert keys[1] and keys[1000] and keys[1] != keys[1000]
