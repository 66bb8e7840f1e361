"""Likelihood messages of modality groups: one batched contraction per group of same-rank modalities.

pymdp's marginalisation (``all_marginal_log_likelihood``) loops over modalities: for modality m and each factor f
it depends on, the expectation of its log-likelihood ``ll_m`` under every other dependency's posterior. Unrolled in
Python, that is one contraction per (modality, dependency), so a program's size (and XLA's compile time) grows
with the number of modalities. Here modalities with the same number k of dependencies form groups
(``sizes.modality_groups``: shapes only, padding bounded); a group's log-likelihoods are one stacked, zero-padded
array ``(M_g, N_1, ..., N_k)`` (each modality's lagging axes in decreasing size, ``sizes.size_sorted_axes``), and
its messages are one batched divide-and-conquer contraction (``transitions.all_but_one``) against the posteriors
of each axis, selected from the padded ``(F, n_max)`` posterior by a 0/1 matrix. The (modality, axis)
contributions are summed into their factors by one 0/1 incidence matrix. Both 0/1 products are written as
multiply-and-reduce, not dots: XLA:CPU fuses them into the iteration's kernels (a dot is a call of its own, and
a small model's loop then runs longer), and no GPU rounds their operands to TF32.

Exact up to summation order: padded log-likelihood entries are 0 and padded posterior entries are 0, so padding
adds exact zeros, and so do the 0/1 products. The program holds a handful of operations per group, whatever the
number of modalities.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ...model.generative_model import ModelStructure
from ..sizes import modality_groups, size_sorted_axes
from .transitions import all_but_one

Array = jax.Array

__all__ = ["ModalityGroup", "GroupedMarginals"]


@dataclass(frozen=True)
class ModalityGroup:
    """Same-rank modalities whose messages run as one batched contraction (static only).

    modalities: (M_g,) their indices in the model, ascending
    deps:       M_g tuples of length k: the factor on each axis of each member's log-likelihood (axes size-sorted)
    shape:      (N_1, ..., N_k): the padded lagging shape (per-axis maxima over the members)
    """

    modalities: tuple[int, ...]
    deps: tuple[tuple[int, ...], ...]
    shape: tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class GroupedMarginals:
    """Likelihood messages of every modality group (static only; see the module docstring).

    num_states: (F,) n_f
    groups:     the groups, ordered by rank then first member
    """

    num_states: tuple[int, ...]
    groups: tuple[ModalityGroup, ...]

    @classmethod
    def plan(cls, structure: ModelStructure, modalities: Optional[Sequence[int]] = None) -> "GroupedMarginals":
        """The groups of ``modalities`` (default: all) from the structure alone."""
        orders = size_sorted_axes(structure)
        deps = structure.A_dependencies
        members = None if modalities is None else tuple(int(i) for i in modalities)
        groups = tuple(
            ModalityGroup(g, tuple(tuple(deps[i][j] for j in orders[i]) for i in g), shape)
            for g, shape in modality_groups(structure, members)
        )
        return cls(tuple(int(n) for n in structure.num_states), groups)

    @property
    def n_max(self) -> int:
        return max(self.num_states)

    def slot_targets(self) -> tuple[int, ...]:
        """The factor receiving each (group, member, axis) contribution, in the order ``marginals_padded`` stacks them."""
        return tuple(f for g in self.groups for d in g.deps for f in d)

    def marginals_padded(self, ll: Sequence[Array], Q: Array) -> Array:
        """ll[g]: (..., M_g, N_1, ..., N_k) zero-padded; Q: (..., F, n_max) padded posteriors (exact zeros in the
        padding), the same leading axes -> (..., F, n_max) likelihood messages (pymdp's
        ``all_marginal_log_likelihood``, padded; entries past n_f are 0)."""
        F, n_max = len(self.num_states), self.n_max
        lead = Q.shape[:-2]
        Qf = Q.reshape((-1, F, n_max))
        L = Qf.shape[0]
        parts = []
        for x, g in zip(ll, self.groups):
            M_g = len(g.modalities)
            x = x.reshape((L * M_g,) + g.shape)
            if g.rank == 1:
                msgs = [x]
            else:
                # (M_g, k, F) 0/1: the posterior of each member's axis j, every axis in one product
                select = np.zeros((M_g, g.rank, F), dtype=np.dtype(Q.dtype))
                for r, d in enumerate(g.deps):
                    select[r, np.arange(g.rank), np.asarray(d)] = 1.0
                # multiply-and-reduce, not a dot: XLA:CPU fuses it into the loop's kernels (a dot is a call of its own)
                q = (select[None, :, :, :, None] * Qf[:, None, None, :, :]).sum(axis=3)  # (L, M_g, k, n_max)
                vectors = [q[:, :, j, :n].reshape(L * M_g, n) for j, n in enumerate(g.shape)]
                msgs = all_but_one(x, vectors)
            padded = [jnp.pad(m.reshape(L, M_g, n), ((0, 0), (0, 0), (0, n_max - n))) for m, n in zip(msgs, g.shape)]
            parts.append(jnp.stack(padded, axis=2).reshape(L, M_g * g.rank, n_max))  # member-major, then axis
        stacked = jnp.concatenate(parts, axis=1) if len(parts) > 1 else parts[0]  # (L, R, n_max)
        targets = np.asarray(self.slot_targets())
        incidence = np.zeros((F, len(targets)), dtype=np.dtype(Q.dtype))
        incidence[targets, np.arange(len(targets))] = 1.0
        out = (incidence[None, :, :, None] * stacked[:, None, :, :]).sum(axis=2)
        return out.reshape(lead + (F, n_max))

    def joint(self, ll: Sequence[Array]) -> Array:
        """One factor: every modality has rank 1 on it; the summed log-likelihood (n_0,)."""
        n0 = self.num_states[0]
        return sum(x[..., :n0].sum(axis=-2) for x in ll)
