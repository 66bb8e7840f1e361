"""The autotuner and the one decision of what runs: device and variant for a model, from its structure, started at
once and verified by timing off the tick path (``decision``: candidates -> decision cache -> start -> verify ->
record), and its deployment (``deployment``: the one place that builds engines).

    from bayes_infer_ros.autotune import EngineConfig, MemoryBudget, decide, deploy, plan_decision, select_variant
    config, budget = EngineConfig("vmp", horizon=5), MemoryBudget.from_mib(2048)
    plan = plan_decision(model, config, budget)   # what starts, what is verified, what is left out and why
    deployment = deploy(model, config, budget)    # the start built and compiled: deployment.engine
    decision = decide(model, config, budget)      # the whole pipeline in this thread: the engine that runs
    variant = select_variant("vmp", model, horizon=5, num_iter=16)      # the start's variant, in milliseconds

Training lives in ``lab.train_autotuner`` (``python -m lab autotune-train``); see docs/autotune.md.
"""
from .decision import Candidate, EngineConfig, Outcome, Pinned, Plan, conclude, plan_decision
from .deployment import (Decision, Deployment, decide, deploy, engine_for, select_variant, start_engine,
                         verify_candidates)
from .devices import DeviceUnavailable, find_devices
from .select import (MemoryBudget, MemoryBudgetExceeded, feature_names, rank_variants, size_estimates,
                     structure_features)

__all__ = ["Candidate", "Decision", "Deployment", "DeviceUnavailable", "EngineConfig", "MemoryBudget",
           "MemoryBudgetExceeded", "Outcome", "Pinned", "Plan", "conclude", "decide", "deploy", "engine_for",
           "feature_names", "find_devices", "plan_decision", "rank_variants", "select_variant", "size_estimates",
           "start_engine", "structure_features", "verify_candidates"]
