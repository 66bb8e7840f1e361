"""The generative model: arrays (A, B, D) kept apart from their hashable structure.

Conventions follow pymdp 1.x:
- ``A[i]`` has shape ``(m_i, n_{deps_i[0]}, ..., n_{deps_i[-1]})``: p(o_i | s_deps).
- ``B[f]`` has shape ``(n_f, n_{bdeps_f[0]}, ..., n_{bdeps_f[-1]}, u_f)``: p(s_f' | s_bdeps, u_f).
- ``D[f]`` has shape ``(n_f,)``: p(s_f at t=0).
- ``C[i]`` has shape ``(m_i,)``: the preferences over observations (log-probabilities, pymdp's C), optional.
- ``E`` has shape ``(num_policies,)``: the prior over policies, optional; ``policy_len`` and ``policies`` decide
  the policies it ranges over (``model/policies.py``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional, Sequence

import numpy as np

from .validation import validate_model

Deps = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class ModelStructure:
    """Everything about a model that decides compiled shapes. Hashable by value.

    num_obs:        (M,)  m_i, levels of each observation modality
    num_states:     (F,)  n_f, levels of each hidden-state factor
    num_controls:   (F,)  u_f, control states of each factor (1 when uncontrolled)
    A_dependencies: M tuples of factor indices
    B_dependencies: F tuples of factor indices
    """

    num_obs: tuple[int, ...]
    num_states: tuple[int, ...]
    num_controls: tuple[int, ...]
    A_dependencies: Deps
    B_dependencies: Deps

    @property
    def num_modalities(self) -> int:
        return len(self.num_obs)

    @property
    def num_factors(self) -> int:
        return len(self.num_states)

    def A_shape(self, i: int) -> tuple[int, ...]:
        return (self.num_obs[i],) + tuple(self.num_states[f] for f in self.A_dependencies[i])

    def B_shape(self, f: int) -> tuple[int, ...]:
        deps = self.B_dependencies[f]
        return (self.num_states[f],) + tuple(self.num_states[d] for d in deps) + (self.num_controls[f],)


def as_deps(deps: Sequence[Sequence[int]]) -> Deps:
    """Normalise a list of dependency lists to a tuple of int tuples."""
    return tuple(tuple(int(d) for d in row) for row in deps)


def trivial_B_dependencies(num_factors: int) -> Deps:
    """Each factor depends only on itself: pymdp's default."""
    return tuple((f,) for f in range(num_factors))


@dataclass
class GenerativeModel:
    """A discrete POMDP generative model in pymdp's array conventions.

    A: M arrays, ``A[i].shape == (m_i, *[n_f for f in A_dependencies[i]])``
    B: F arrays, ``B[f].shape == (n_f, *[n_d for d in B_dependencies[f]], u_f)``, or None (static states)
    D: F arrays, ``D[f].shape == (n_f,)``; uniform when omitted.
    C: M arrays, ``C[i].shape == (m_i,)``: preferences over observations (pymdp's C, log-probabilities), or None
       (pymdp's default then: 1 / m_i, no preference).
    E: ``(num_policies,)``: the prior over policies, or None (uniform).
    policy_len: steps per policy (pymdp's ``policy_len``), or None (1; from ``policies`` when they are given).
    policies: ``(num_policies, policy_len, F)`` int: a given list of policies, or None (every combination of the
       factors' controls: ``policies.construct_policies``).
    Names are optional; when given they must match the counts. A factor may be observed by no modality (pymdp
    supports it); its size then comes from B, or from D when the model has no B.
    """

    A: list[np.ndarray]
    A_dependencies: Deps
    B: Optional[list[np.ndarray]] = None
    B_dependencies: Optional[Deps] = None
    D: Optional[list[np.ndarray]] = None
    factor_names: Optional[list[str]] = None
    modality_names: Optional[list[str]] = None
    state_labels: Optional[list[list[str]]] = None
    observation_labels: Optional[list[list[str]]] = None
    control_labels: Optional[list[list[str]]] = None
    C: Optional[list[np.ndarray]] = None
    E: Optional[np.ndarray] = None
    policy_len: Optional[int] = None
    policies: Optional[np.ndarray] = None

    def __post_init__(self) -> None:
        self.A = [np.asarray(a) for a in self.A]
        self.A_dependencies = as_deps(self.A_dependencies)
        if self.B is not None:
            self.B = [np.asarray(b) for b in self.B]
        if self.B_dependencies is None:
            self.B_dependencies = trivial_B_dependencies(self.num_factors)
        else:
            self.B_dependencies = as_deps(self.B_dependencies)
        if self.D is not None:
            self.D = [np.asarray(d) for d in self.D]
        elif all(n >= 1 for n in self.num_states):  # else a factor has no size: validation names it
            self.D = [np.full(n, 1.0 / n) for n in self.num_states]
        if self.C is not None:
            self.C = [np.asarray(c) for c in self.C]
        if self.E is not None:
            self.E = np.asarray(self.E)
        if self.policies is not None:
            self.policies = np.asarray(self.policies)

    # ---- structure -------------------------------------------------------------------------
    @property
    def num_factors(self) -> int:
        return len(self.num_states)

    @property
    def num_modalities(self) -> int:
        return len(self.A)

    @property
    def num_states(self) -> tuple[int, ...]:
        """n_f per factor, read from B when present, else from D, else from A's dependency axes (0 for a factor
        no modality observes: unknown)."""
        if self.B is not None:
            return tuple(int(b.shape[0]) for b in self.B)
        if self.D is not None:
            return tuple(int(np.shape(d)[0]) for d in self.D)
        sizes: dict[int, int] = {}
        for a, deps in zip(self.A, self.A_dependencies):
            for axis, f in enumerate(deps):
                if a.ndim > axis + 1:
                    sizes.setdefault(f, int(a.shape[axis + 1]))
        return tuple(sizes.get(f, 0) for f in range(max(sizes, default=-1) + 1))

    @property
    def num_obs(self) -> tuple[int, ...]:
        return tuple(int(a.shape[0]) for a in self.A)

    @property
    def num_controls(self) -> tuple[int, ...]:
        if self.B is None:
            return (1,) * self.num_factors
        return tuple(int(b.shape[-1]) for b in self.B)

    @property
    def has_policy_prior(self) -> bool:
        """The model carries something only policy inference reads: C, E, policy_len or policies."""
        return any(x is not None for x in (self.C, self.E, self.policy_len, self.policies))

    @property
    def horizon(self) -> int:
        """The steps of each policy: ``policies``' when given, else ``policy_len``, else 1 (pymdp's default)."""
        if self.policies is not None:
            return int(np.shape(self.policies)[1])
        return 1 if self.policy_len is None else int(self.policy_len)

    @property
    def num_policies(self) -> int:
        """How many policies E ranges over: the given list's length, else prod_f u_f ** horizon (every combination
        of the controls: ``policies.construct_policies``)."""
        if self.policies is not None:
            return int(np.shape(self.policies)[0])
        return math.prod(self.num_controls) ** self.horizon

    @property
    def structure(self) -> ModelStructure:
        return ModelStructure(
            num_obs=self.num_obs,
            num_states=self.num_states,
            num_controls=self.num_controls,
            A_dependencies=self.A_dependencies,
            B_dependencies=self.B_dependencies,
        )

    # ---- names -----------------------------------------------------------------------------
    def factor_name(self, f: int) -> str:
        return self.factor_names[f] if self.factor_names else f"factor_{f}"

    def modality_name(self, i: int) -> str:
        return self.modality_names[i] if self.modality_names else f"modality_{i}"

    def state_label_list(self, f: int) -> list[str]:
        if self.state_labels:
            return list(self.state_labels[f])
        return [str(k) for k in range(self.num_states[f])]

    def observation_label_list(self, i: int) -> list[str]:
        if self.observation_labels:
            return list(self.observation_labels[i])
        return [str(k) for k in range(self.num_obs[i])]

    def with_dtype(self, dtype) -> "GenerativeModel":
        """A copy with every tensor (A, B, D, C, E) cast to ``dtype``."""
        cast = lambda xs: None if xs is None else [np.asarray(x, dtype=dtype) for x in xs]  # noqa: E731
        E = None if self.E is None else np.asarray(self.E, dtype=dtype)
        return replace(self, A=cast(self.A), B=cast(self.B), D=cast(self.D), C=cast(self.C), E=E)

    def validate(self, atol: float = 1e-4) -> "GenerativeModel":
        """Raise :class:`ModelValidationError` naming the tensor, axis and value; return self."""
        validate_model(self, atol=atol)
        return self
