"""VARIANTS and ``build_inference``: the name -> ops table and the one-time build."""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np

from ..model.generative_model import GenerativeModel, ModelStructure, as_deps, trivial_B_dependencies
from ..model.validation import ModelValidationError, validate_model
from .engine import ALGORITHMS, InferenceEngine
from .reference import LoopedLikelihood, LoopedTransitions


class VariantUnsupported(ValueError):
    """A variant cannot run this model (e.g. its prepared arrays exceed the memory budget)."""


# name -> (likelihood ops class, transition ops class). Each class has
# ``prepare(structure, arrays_with_batch_axis, dtype) -> (ops, params)``.
_REGISTRY: dict[str, tuple[Any, Any]] = {"baseline": (LoopedLikelihood, LoopedTransitions)}

# The paper's variants table, in its order; a name appears in VARIANTS once registered.
PAPER_VARIANTS = (
    "hybrid", "sparse_hybrid", "clustered_hybrid",
    "hybrid_block", "sparse_hybrid_block", "clustered_hybrid_block",
    "end_to_end", "sparse_end_to_end", "clustered_end_to_end",
)
VARIANTS: tuple[str, ...] = ("baseline",)
# Variants that are not JAX programs: name -> engine class (same public API as InferenceEngine).
# ``fused_numba`` needs the optional numba; building it without numba raises VariantUnsupported.
NATIVE_VARIANTS = ("fused_numba",)


def register_variant(name: str, likelihood_ops: Any, transition_ops: Any) -> None:
    """Add (or replace) a variant; keeps VARIANTS in the paper's order."""
    global VARIANTS
    _REGISTRY[name] = (likelihood_ops, transition_ops)
    order = ("baseline",) + PAPER_VARIANTS
    VARIANTS = (tuple(n for n in order if n in _REGISTRY) + tuple(n for n in _REGISTRY if n not in order)
                + NATIVE_VARIANTS)


def variant_ops(name: str) -> tuple[Any, Any]:
    if name in NATIVE_VARIANTS:
        raise ValueError(f"variant: {name!r} is a native engine, it has no JAX ops")
    if name not in _REGISTRY:
        raise ValueError(f"variant: unknown {name!r}; expected one of {list(VARIANTS)}")
    return _REGISTRY[name]


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


def build_inference(
    algorithm: str,
    A: Sequence[Any],
    A_dependencies: Sequence[Sequence[int]],
    B: Optional[Sequence[Any]] = None,
    B_dependencies: Optional[Sequence[Sequence[int]]] = None,
    variant: str = "baseline",
    num_iter: int = 16,
    tau: float = 1.0,
    dtype: Any = None,
    validate: bool = True,
    param_passing: str = "auto",
) -> InferenceEngine:
    """Build an engine for ``algorithm`` ("fpi" | "vmp" | "mmp") and ``variant``.

    A[i]: ([b,] m_i, n_deps...), B[f]: ([b,] n_f, n_deps..., u_f). The one-time work (validation,
    log-tensors, padding/merging/clustering, BCOO conversion) happens here; the returned engine's calls
    are jitted. ``dtype`` defaults to A's float dtype (float32 unless x64 is enabled and A is float64).
    ``param_passing``: "separate" arrays, one "packed" buffer per dtype, or "auto" (see InferenceEngine).
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm: unknown {algorithm!r}; expected one of {list(ALGORITHMS)}")
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
    num_states = tuple(int(b.shape[1]) for b in B_b) if B_b is not None else None
    if num_states is None:
        sizes: dict[int, int] = {}
        for a, deps in zip(A_b, A_dependencies):
            for axis, f in enumerate(deps):
                sizes.setdefault(f, int(a.shape[axis + 2]))
        num_states = tuple(sizes.get(f, 0) for f in range(max(sizes, default=-1) + 1))
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
        import jax.numpy as jnp

        dtype = jnp.result_type(float) if A[0].dtype == np.float64 else np.float32
    structure = ModelStructure(
        num_obs=tuple(int(a.shape[1]) for a in A_b),
        num_states=num_states,
        num_controls=tuple(int(b.shape[-1]) for b in B_b) if B_b is not None else (1,) * len(num_states),
        A_dependencies=A_dependencies,
        B_dependencies=B_dependencies,
    )
    if variant in NATIVE_VARIANTS:
        from .native import NativeEngine

        return NativeEngine(algorithm, structure, A_b, B_b, num_iter, tau, batch, dtype)
    lik_ops, lik_params = lik_cls.prepare(structure, A_b, dtype)
    trans_ops, trans_params = trans_cls.prepare(structure, B_b, dtype)
    return InferenceEngine(algorithm, variant, structure, lik_ops, lik_params, trans_ops, trans_params, B_b,
                           num_iter, tau, batch, dtype, param_passing)


def engine_for_model(model: GenerativeModel, algorithm: str, variant: str = "baseline", **kwargs: Any) -> InferenceEngine:
    """``build_inference`` on a :class:`GenerativeModel` (already validated by its loader)."""
    return build_inference(algorithm, model.A, model.A_dependencies, model.B, model.B_dependencies, variant=variant, **kwargs)
