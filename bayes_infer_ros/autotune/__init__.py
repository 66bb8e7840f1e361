"""The autotuner and the one decision of what runs: device and variant for a model, from its structure and, at
configure, from timing the best candidates here.

    from bayes_infer_ros.autotune import EngineConfig, MemoryBudget, decide, select_variant
    decision = decide(model, EngineConfig("vmp", horizon=5), MemoryBudget.from_mib(2048))
    variant = select_variant("vmp", model, horizon=5, num_iter=16)      # the ranking's pick, in milliseconds

Training lives in ``lab.train_autotuner`` (``python -m lab autotune-train``); see docs/autotune.md.
"""
from .budget import MemoryBudget, MemoryBudgetExceeded
from .decision import Candidate, Decision, EngineConfig, decide, select_variant, verify_engines
from .devices import DeviceUnavailable, find_devices
from .features import feature_names, size_estimates, structure_features
from .select import rank_variants

__all__ = ["Candidate", "Decision", "DeviceUnavailable", "EngineConfig", "MemoryBudget", "MemoryBudgetExceeded",
           "decide", "feature_names", "find_devices", "rank_variants", "select_variant", "size_estimates",
           "structure_features", "verify_engines"]
