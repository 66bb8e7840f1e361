"""Parameter counts: stored elements of each variant's prepared likelihood arrays vs the unmerged model.

"Stored elements" counts the values a variant keeps for ONE model: dense merged arrays with their
padding; BCOO arrays by ``nse`` (stored values; their integer indices are not counted, as in the paper's
parameter counts). "unmerged" (= "baseline") is the sum of the A-tensor sizes.

Hybrid variants are counted analytically from their plans (no array is allocated, so huge padded
layouts can be counted safely); only BCOO ``nse`` reads values: the non-zeros of ``log A`` (padding and
log 1 = 0 are not stored), the max over a batch. Without values (a bare ``ModelStructure``) every real
entry is assumed non-zero. Other registered variants (the end-to-end family) are counted by running
their ``prepare`` and asking the ops for ``stored_elements()``; that needs the arrays, so on a bare
structure they get uniform A tensors.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence, Union

import numpy as np

from ...model.generative_model import GenerativeModel, ModelStructure
from ..numerics import log_stable_np

HYBRID_VARIANTS = (
    "hybrid", "sparse_hybrid", "clustered_hybrid",
    "hybrid_block", "sparse_hybrid_block", "clustered_hybrid_block",
)


def _structure_and_arrays(structure_or_model: Any, A: Optional[Sequence[np.ndarray]]) -> tuple[ModelStructure, Optional[list[np.ndarray]]]:
    if isinstance(structure_or_model, GenerativeModel):
        return structure_or_model.structure, [np.asarray(a) for a in structure_or_model.A] if A is None else list(A)
    if isinstance(structure_or_model, ModelStructure):
        return structure_or_model, None if A is None else [np.asarray(a) for a in A]
    raise TypeError(f"parameter_counts: expected a ModelStructure or GenerativeModel, got {type(structure_or_model).__name__}")


def _batched(structure: ModelStructure, A: list[np.ndarray]) -> list[np.ndarray]:
    """A with a leading batch axis (added when absent)."""
    if A[0].ndim == len(structure.A_dependencies[0]) + 2:
        return A
    return [a[None] for a in A]


def _nonzeros_per_model(structure: ModelStructure, A: Optional[list[np.ndarray]], dtype: Any) -> np.ndarray:
    """(b, M) non-zeros of log A per model and modality (all real entries when A is unknown)."""
    if A is None:
        return np.array([[structure.num_obs[i] * int(np.prod([structure.num_states[f] for f in d], dtype=np.int64))
                          for i, d in enumerate(structure.A_dependencies)]], dtype=np.int64)
    A_b = _batched(structure, A)
    cols = [np.count_nonzero(log_stable_np(a).astype(np.dtype(dtype)).reshape(a.shape[0], -1), axis=1) for a in A_b]
    return np.stack(cols, axis=1).astype(np.int64)


def _hybrid_count(variant: str, structure: ModelStructure, nonzeros: np.ndarray) -> int:
    from ..variants.hybrid import LIKELIHOOD_OPS

    cls = LIKELIHOOD_OPS[variant]
    groups, plans = cls.plan(structure)
    if cls.sparse:
        # one BCOO per group; nse = max over the batch of the group's non-zeros (at least 1)
        return int(sum(max(1, int(nonzeros[:, list(g)].sum(axis=1).max())) for g in groups))
    return int(sum(p.merged_size for p in plans))


END_TO_END_VARIANTS = ("end_to_end", "sparse_end_to_end", "clustered_end_to_end")


def _prepared_count(variant: str, structure: ModelStructure, A: Optional[list[np.ndarray]], dtype: Any) -> int:
    from ..registry import variant_ops

    lik_cls, _ = variant_ops(variant)
    if A is None:
        A = [np.full(structure.A_shape(i), 1.0 / structure.num_obs[i]) for i in range(structure.num_modalities)]
    ops, params = lik_cls.prepare(structure, _batched(structure, A), dtype)
    if hasattr(ops, "stored_elements"):
        return int(ops.stored_elements())
    # fallback: floating-point leaves of one model (integer leaves are indices)
    import jax

    leaves = [x for x in jax.tree_util.tree_leaves(params) if np.issubdtype(np.asarray(x).dtype, np.floating)]
    return int(sum(np.size(x) // np.shape(x)[0] for x in leaves))


def parameter_counts(
    structure_or_model: Union[ModelStructure, GenerativeModel],
    variants: Optional[Sequence[str]] = None,
    A: Optional[Sequence[np.ndarray]] = None,
    dtype: Any = np.float32,
) -> dict[str, int]:
    """Stored elements per variant for one model, plus "unmerged" (= "baseline": the A sizes).

    structure_or_model: a ModelStructure (BCOO nse then assumes no zero in log A) or a GenerativeModel
    variants:           names to count (default: the six hybrids plus every other registered variant)
    A:                  optional arrays ((b,) m_i, n_deps...) giving the values for BCOO nse
    dtype:              the dtype the log-tensors are stored in (decides which log A entries are 0)
    """
    structure, arrays = _structure_and_arrays(structure_or_model, A)
    if variants is None:
        from ..registry import VARIANTS

        variants = tuple(VARIANTS)
    nonzeros = _nonzeros_per_model(structure, arrays, dtype)
    unmerged = int(sum(structure.num_obs[i] * int(np.prod([structure.num_states[f] for f in d], dtype=np.int64))
                       for i, d in enumerate(structure.A_dependencies)))
    out: dict[str, int] = {"unmerged": unmerged}
    end_to_end_counts: Optional[dict] = None
    for v in variants:
        if v == "baseline":
            out[v] = unmerged
        elif v in HYBRID_VARIANTS:
            out[v] = _hybrid_count(v, structure, nonzeros)
        elif v in END_TO_END_VARIANTS:
            if end_to_end_counts is None:  # from the plan: counts layouts too large to prepare, allocates nothing
                from ..variants.end_to_end import stored_elements

                end_to_end_counts = stored_elements(structure, arrays, dtype)
            out[v] = int(end_to_end_counts[v])
        else:
            out[v] = _prepared_count(v, structure, arrays, dtype)
    return out
