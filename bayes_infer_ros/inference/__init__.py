"""The inference core: pymdp-exact FPI/VMP/MMP, the paper's merged variants, one build, jitted calls.

    from bayes_infer_ros.inference import build_inference, VARIANTS
    engine = build_inference("fpi", A, A_dependencies, variant="baseline", num_iter=16)
    qs = engine(obs, prior)
"""
from .xla_config import apply_defaults as _apply_xla_defaults

_apply_xla_defaults()  # opt-in flags, before any computation creates the XLA backend (see xla_config)

from .algorithm_specs import ALGORITHM_SPECS, ALGORITHMS, Algorithm, algorithm_spec  # noqa: E402
from .api import Capabilities, Engine, PackedLayout  # noqa: E402
from .engine import InferenceEngine  # noqa: E402
from .errors import VariantUnsupported  # noqa: E402
from .registry import (PAPER_VARIANTS, VARIANT_PLATFORMS, VARIANTS, build_inference, engine_for_model,  # noqa: E402
                       parameter_counts, size_estimates, variant_ops)

__all__ = ["ALGORITHMS", "ALGORITHM_SPECS", "Algorithm", "algorithm_spec", "VARIANTS", "PAPER_VARIANTS", "VARIANT_PLATFORMS", "Capabilities", "Engine", "InferenceEngine", "PackedLayout", "VariantUnsupported",
           "build_inference", "engine_for_model", "parameter_counts", "size_estimates", "variant_ops"]
