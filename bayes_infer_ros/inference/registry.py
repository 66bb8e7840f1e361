"""VARIANTS (the literal name -> ops table), ``build_inference`` (the one-time build) and sizes by variant name."""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Optional, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np

from ..model.generative_model import GenerativeModel, ModelStructure, as_deps, trivial_B_dependencies
from ..model.validation import ModelValidationError, validate_model
from . import sizes
from .algorithm_specs import algorithm_spec
from .api import Engine
from .engine import InferenceEngine, PreparedVariant
from .errors import VariantUnsupported
from .native import CudaEngine, NativeEngine
from .reference import LoopedLikelihood, LoopedTransitions
from .variants import end_to_end, fused, hybrid
from .variants.transitions import MergedTransitions


# name -> (likelihood ops class, transition ops class), in the order of VARIANTS: baseline, the paper's
# variants table in its order, then the fused family. Each class has
# ``prepare(structure, arrays_with_batch_axis, dtype) -> (ops, params)``.
VARIANT_OPS: dict[str, tuple[Any, Any]] = {
    "baseline": (LoopedLikelihood, LoopedTransitions),
    "hybrid": (hybrid.HybridLikelihood, MergedTransitions),
    "sparse_hybrid": (hybrid.SparseHybridLikelihood, MergedTransitions),
    "clustered_hybrid": (hybrid.ClusteredHybridLikelihood, MergedTransitions),
    "hybrid_block": (hybrid.HybridBlockLikelihood, MergedTransitions),
    "sparse_hybrid_block": (hybrid.SparseHybridBlockLikelihood, MergedTransitions),
    "clustered_hybrid_block": (hybrid.ClusteredHybridBlockLikelihood, MergedTransitions),
    "end_to_end": (end_to_end.EndToEndLikelihood, MergedTransitions),
    "sparse_end_to_end": (end_to_end.SparseEndToEndLikelihood, MergedTransitions),
    "clustered_end_to_end": (end_to_end.ClusteredEndToEndLikelihood, MergedTransitions),
    "fused_dense": (fused.FusedDenseLikelihood, MergedTransitions),
    "fused_pairwise": (fused.FusedPairwiseLikelihood, MergedTransitions),
}
# Variants that are not JAX programs: name -> engine class (the Engine contract; its ``device`` class attribute
# is the one platform it runs on, its ``available()`` whether it can be built here, its ``capabilities`` what it
# supports). ``fused_numba`` needs the
# optional numba, imported only when the engine is built (without it: VariantUnsupported); ``fused_cuda`` (the
# same kernels as one CUDA launch per call) needs numba's CUDA target and a device.
NATIVE_VARIANTS: dict[str, Any] = {"fused_numba": NativeEngine, "fused_cuda": CudaEngine}

VARIANTS: tuple[str, ...] = tuple(VARIANT_OPS) + tuple(NATIVE_VARIANTS)
# The paper's variants table, in its order.
PAPER_VARIANTS: tuple[str, ...] = VARIANTS[1:10]


#: Platforms a JAX variant runs on (wherever JAX has a device).
JAX_PLATFORMS: tuple[str, ...] = InferenceEngine.capabilities.platforms


#: The platforms each variant runs on, as its engine class declares them (``capabilities.platforms``).
VARIANT_PLATFORMS: dict[str, tuple[str, ...]] = {
    **{name: JAX_PLATFORMS for name in VARIANT_OPS},
    **{name: cls.capabilities.platforms for name, cls in NATIVE_VARIANTS.items()},
}


def variant_ops(name: str) -> tuple[Any, Any]:
    """(likelihood ops class, transition ops class) of a JAX variant."""
    if name in NATIVE_VARIANTS:
        raise ValueError(f"variant: {name!r} is a native engine, it has no JAX ops")
    if name not in VARIANT_OPS:
        raise ValueError(f"variant: unknown {name!r}; expected one of {list(VARIANTS)}")
    return VARIANT_OPS[name]


def _infer_batch(A: Sequence[np.ndarray], A_dependencies) -> Optional[int]:
    ranks = {a.ndim - len(d) for a, d in zip(A, A_dependencies)}
    if ranks == {1}:
        return None
    if ranks == {2}:
        sizes = {a.shape[0] for a in A}
        if len(sizes) != 1:
            raise ModelValidationError("A", f"batched A tensors must share the leading batch size, got {sorted(sizes)}")
        return sizes.pop()
    raise ModelValidationError(
        "A", "each A[i] must have 1 + len(A_dependencies[i]) axes, or one more for a leading batch axis (all alike)"
    )


def _factor_sizes(A_b: Sequence[np.ndarray], A_dependencies: Sequence[Sequence[int]],
                  B_b: Optional[Sequence[np.ndarray]], B_dependencies: Optional[Sequence[Sequence[int]]],
                  num_states: Optional[Sequence[int]]) -> tuple[int, ...]:
    """n_f per factor: from B (axis 1 of the batched tensors), else ``num_states``, else A's dependency axes (as
    many factors as A or ``B_dependencies`` name); a factor that no modality observes and nothing sizes is refused
    naming ``num_states``."""
    if B_b is not None:
        from_B = tuple(int(b.shape[1]) for b in B_b)
        if num_states is not None and tuple(int(n) for n in num_states) != from_B:
            raise ModelValidationError("num_states", f"{tuple(num_states)} differs from the sizes of B, {from_B}")
        return from_B
    if num_states is not None:
        return tuple(int(n) for n in num_states)
    sizes: dict[int, int] = {}
    for a, deps in zip(A_b, A_dependencies):
        for axis, f in enumerate(deps):
            if a.ndim > axis + 2:
                sizes.setdefault(f, int(a.shape[axis + 2]))
    F = max(max(sizes, default=-1) + 1, len(B_dependencies) if B_dependencies is not None else 0)
    unsized = [f for f in range(F) if f not in sizes]
    if unsized:
        raise ModelValidationError("num_states", f"factor(s) {unsized} are observed by no modality and there is no B, "
                                                 "so nothing gives their sizes: pass num_states (the sizes of D)")
    return tuple(sizes[f] for f in range(F))


def build_inference(
    algorithm: str,
    A: Sequence[Any],
    A_dependencies: Sequence[Sequence[int]],
    B: Optional[Sequence[Any]] = None,
    B_dependencies: Optional[Sequence[Sequence[int]]] = None,
    variant: str = "baseline",
    num_iter: int = 16,
    tau: float = 1.0,
    *,
    dtype: Any = None,
    validate: bool = True,
    device: Optional[jax.Device] = None,
    num_states: Optional[Sequence[int]] = None,
) -> Engine:
    """Build an engine for ``algorithm`` ("fpi" | "vmp" | "mmp") and ``variant``.

    A[i]: ([b,] m_i, n_deps...), B[f]: ([b,] n_f, n_deps..., u_f). A factor may be observed by no modality
    (as in pymdp: FPI keeps its prior, VMP/MMP follow its dynamics); without B its size comes from
    ``num_states`` (n_f per factor, e.g. the sizes of D; ``engine_for_model`` passes the model's), which also
    counts factors after the last one A depends on. The one-time work (validation,
    log-tensors, padding/merging/clustering, BCOO conversion) happens here; the returned engine's calls
    are jitted. ``dtype`` defaults to A's float dtype (float32 unless x64 is enabled and A is float64).
    ``device``: the JAX device a JAX variant's calls run on (default: JAX's default device); a native variant
    refuses a device of another platform than its own (``VariantUnsupported``).
    """
    algorithm_spec(algorithm)  # ValueError naming the algorithms expected
    if variant not in NATIVE_VARIANTS:
        lik_cls, trans_cls = variant_ops(variant)
    if int(num_iter) < 1:
        raise ValueError(f"num_iter: expected an integer >= 1, got {num_iter}")
    if not np.isfinite(tau) or tau <= 0:
        raise ValueError(f"tau: expected a finite number > 0, got {tau}")
    A = [np.asarray(a) for a in A]
    A_dependencies = as_deps(A_dependencies)
    batch = _infer_batch(A, A_dependencies)
    A_b = A if batch is not None else [a[None] for a in A]
    B_b = None
    if B is not None:
        B = [np.asarray(b) for b in B]
        B_b = B if batch is not None else [b[None] for b in B]
    num_states = _factor_sizes(A_b, A_dependencies, B_b, B_dependencies, num_states)
    if B_dependencies is None:
        B_dependencies = trivial_B_dependencies(len(num_states))
    B_dependencies = as_deps(B_dependencies)
    if validate:
        for k in range(A_b[0].shape[0]):
            validate_model(GenerativeModel(
                A=[a[k] for a in A_b], A_dependencies=A_dependencies,
                B=None if B_b is None else [b[k] for b in B_b], B_dependencies=B_dependencies,
                D=[np.full(n, 1.0 / max(n, 1)) for n in num_states],
            ))
    if dtype is None:
        dtype = jnp.result_type(float) if A[0].dtype == np.float64 else np.float32
    structure = ModelStructure(
        num_obs=tuple(int(a.shape[1]) for a in A_b),
        num_states=num_states,
        num_controls=tuple(int(b.shape[-1]) for b in B_b) if B_b is not None else (1,) * len(num_states),
        A_dependencies=A_dependencies,
        B_dependencies=B_dependencies,
    )
    if variant in NATIVE_VARIANTS:
        engine_cls = NATIVE_VARIANTS[variant]
        if device is not None and device.platform != engine_cls.device:
            raise VariantUnsupported(f"variant {variant} runs on the {engine_cls.device}, not on {device.platform}")
        return engine_cls(algorithm, structure, A_b, B_b, num_iter, tau, batch, dtype)
    prepared = PreparedVariant(*lik_cls.prepare(structure, A_b, dtype), *trans_cls.prepare(structure, B_b, dtype))
    return InferenceEngine(algorithm, variant, structure, prepared, B_b, num_iter, tau, batch, dtype,
                           jax_device=device, A=A_b)


def engine_for_model(model: GenerativeModel, algorithm: str, variant: str = "baseline", **kwargs: Any) -> Engine:
    """``build_inference`` on a :class:`GenerativeModel` (already validated by its loader)."""
    return build_inference(algorithm, model.A, model.A_dependencies, model.B, model.B_dependencies, variant=variant,
                           num_states=model.num_states, **kwargs)


# ---- sizes by variant name (the layouts' counts live in ``sizes``) ----------------------------------
def _ops_class(name: str) -> Any:
    if name in NATIVE_VARIANTS:
        return NATIVE_VARIANTS[name]
    return variant_ops(name)[0]


def _as_structure(structure_or_model: Any) -> tuple[ModelStructure, Optional[list[np.ndarray]]]:
    if isinstance(structure_or_model, GenerativeModel):
        return structure_or_model.structure, [np.asarray(a) for a in structure_or_model.A]
    if isinstance(structure_or_model, ModelStructure):
        return structure_or_model, None
    raise TypeError(f"structure_or_model: expected a ModelStructure or GenerativeModel, got {type(structure_or_model).__name__}")


def parameter_counts(
    structure_or_model: Union[ModelStructure, GenerativeModel],
    variants: Optional[Sequence[str]] = None,
    A: Optional[Sequence[np.ndarray]] = None,
    dtype: Any = np.float32,
) -> dict[str, int]:
    """Stored elements of each variant's prepared likelihood arrays for one model, plus "unmerged" (the A sizes).

    structure_or_model: a ModelStructure (BCOO nse then assumes no zero in log A) or a GenerativeModel
    variants:           names to count (default: every name in VARIANTS)
    A:                  optional arrays ((b,) m_i, n_deps...) giving the values for BCOO nse
    dtype:              the dtype the log-tensors are stored in (decides which log A entries are 0)

    Counted from the build-time plans (``sizes``): nothing is allocated, so a layout too large to build
    is counted, not refused.
    """
    structure, arrays = _as_structure(structure_or_model)
    if A is not None:
        arrays = [np.asarray(a) for a in A]
    nonzeros = sizes.nonzeros_per_model(structure, arrays, dtype)
    out = {"unmerged": sizes.unmerged_elements(structure)}
    for name in (VARIANTS if variants is None else variants):
        out[name] = int(_ops_class(name).planned_elements(structure, nonzeros))
    return out


@lru_cache(maxsize=256)
def _size_estimates(structure: ModelStructure) -> dict[str, int]:
    est = parameter_counts(structure)
    groups = {name: len(plan) for name, plan in (
        ("_num_rank_clusters", sizes.axis_groups(structure, True)),
        ("_num_block_clusters", sizes.block_groups(structure, True)),
    )}
    est.update(groups)
    return est


def size_estimates(structure: ModelStructure) -> dict[str, int]:
    """Stored elements of every variant on ``structure`` from its real plan (no values: every real entry of
    log A counts as non-zero), plus "unmerged", and the plan summaries "_num_rank_clusters" (rank
    clusters) and "_num_block_clusters" (agglomerative clusters at the elbow). Cached per structure."""
    return dict(_size_estimates(structure))
