"""The autotuner: pick the fastest variant for a model from its structure alone.

    from bayes_infer_ros.autotune import select_variant
    variant = select_variant("vmp", model, horizon=5, num_iter=16)

Public: ``select_variant``, ``rank_variants``, ``verify_variants`` / ``verify_engines``, ``structure_features``. Training lives in
``bayes_infer_ros.bench.train_autotuner`` (``bayes-infer autotune-train``); see docs/autotune.md.
"""
from .features import feature_names, size_estimates, structure_features
from .select import rank_variants, select_variant, verify_engines, verify_variants

__all__ = ["feature_names", "rank_variants", "select_variant", "size_estimates", "structure_features",
           "verify_engines", "verify_variants"]
