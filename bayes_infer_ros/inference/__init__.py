"""The inference core: pymdp-exact FPI/VMP/MMP, the paper's merged variants, one build, jitted calls.

    from bayes_infer_ros.inference import build_inference, VARIANTS
    engine = build_inference("fpi", A, A_dependencies, variant="baseline", num_iter=16)
    qs = engine(obs, prior)
"""
from .xla_config import apply_defaults as _apply_xla_defaults

_apply_xla_defaults()  # opt-in flags, before any computation creates the XLA backend (see xla_config)

from . import registry as _registry  # noqa: E402
from .engine import ALGORITHMS, InferenceEngine, PackedLayout
from .registry import PAPER_VARIANTS, VariantUnsupported, build_inference, engine_for_model, register_variant, variant_ops

from .merging import parameter_counts

try:  # variants register themselves on import; a missing module leaves the rest usable
    from .variants import register_all as _register_all

    _register_all()
except ImportError:  # pragma: no cover - during development only
    pass


def __getattr__(name: str):
    if name == "VARIANTS":
        return _registry.VARIANTS
    raise AttributeError(name)


__all__ = ["ALGORITHMS", "VARIANTS", "PAPER_VARIANTS", "InferenceEngine", "PackedLayout", "VariantUnsupported",
           "build_inference", "engine_for_model", "parameter_counts", "register_variant", "variant_ops"]
