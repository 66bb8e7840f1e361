"""Model validation with messages that name the tensor, the axis and the offending value."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional, Sequence

import numpy as np

if TYPE_CHECKING:
    from .generative_model import GenerativeModel

NAME_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
#: The most policies a model enumerates (prod_f u_f ** policy_len grows fast): past it the model is refused.
MAX_POLICIES = 1 << 20


class ModelValidationError(ValueError):
    """A model (or model file/parameter) was refused. ``field`` names the offending entry."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.reason = message


def _check_finite_nonnegative(name: str, x: np.ndarray) -> None:
    if not np.issubdtype(x.dtype, np.number) or np.issubdtype(x.dtype, np.complexfloating):
        raise ModelValidationError(name, f"expected a real-valued array, got dtype {x.dtype}")
    bad = ~np.isfinite(x)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ModelValidationError(name, f"non-finite value {x[idx]} at index {idx} (NaN/inf are not probabilities)")
    if (x < 0).any():
        idx = tuple(int(i) for i in np.argwhere(x < 0)[0])
        raise ModelValidationError(name, f"negative entry {x[idx]:g} at index {idx}")


def _check_normalised(name: str, x: np.ndarray, axis: int, atol: float) -> None:
    sums = x.sum(axis=axis)
    off = np.abs(sums - 1.0) > atol
    if off.any():
        idx = tuple(int(i) for i in np.argwhere(off)[0])
        raise ModelValidationError(
            name,
            f"distributions along axis {axis} must sum to 1 (tolerance {atol:g}); "
            f"the column at index {idx} of the remaining axes sums to {sums[idx]:.6g}",
        )


def _check_distributions(name: str, x: np.ndarray, atol: float) -> None:
    """Real, finite, non-negative, and every distribution along axis 0 sums to 1 within ``atol``."""
    _check_finite_nonnegative(name, x)
    _check_normalised(name, x, axis=0, atol=atol)


def _check_rank(name: str, x: np.ndarray, deps_field: str, deps: Sequence[int], other_axes: int, layout: str) -> None:
    """``x`` has one axis per dependency plus ``other_axes`` (``layout`` says which)."""
    if x.ndim != len(deps) + other_axes:
        raise ModelValidationError(
            name, f"has {x.ndim} axes but {deps_field}={list(deps)} needs {len(deps) + other_axes} ({layout})"
        )


def _check_dependency_axes(name: str, x: np.ndarray, deps: Sequence[int], num_states: Sequence[int]) -> None:
    """Axes 1, 2, ... of ``x`` have the sizes of the factors in ``deps``."""
    for axis, f in enumerate(deps, start=1):
        if x.shape[axis] != num_states[f]:
            raise ModelValidationError(
                name, f"axis {axis} has length {x.shape[axis]} but factor {f} has {num_states[f]} levels"
            )


def _check_deps(name: str, deps: Sequence[Sequence[int]], num_factors: int) -> None:
    for i, row in enumerate(deps):
        if len(row) == 0:
            raise ModelValidationError(f"{name}[{i}]", "dependency list is empty; list at least one factor")
        if len(set(row)) != len(row):
            raise ModelValidationError(f"{name}[{i}]", f"repeated factor index in {list(row)}")
        for d in row:
            if not 0 <= d < num_factors:
                raise ModelValidationError(
                    f"{name}[{i}]", f"factor index {d} out of range: the model has {num_factors} factors (0..{num_factors - 1})"
                )


def _check_names(field: str, names: Optional[Sequence[str]], count: int) -> None:
    if names is None:
        return
    if len(names) != count:
        raise ModelValidationError(field, f"expected {count} names, got {len(names)}")
    for n in names:
        if not isinstance(n, str) or not NAME_PATTERN.match(n):
            raise ModelValidationError(
                field, f"name {n!r} is not valid: use a letter then letters, digits or '_' (it becomes a ROS topic/parameter name)"
            )
    if len(set(names)) != len(names):
        raise ModelValidationError(field, f"names must be unique, got {list(names)}")


def _check_labels(field: str, labels: Optional[Sequence[Sequence[str]]], sizes: Sequence[int]) -> None:
    if labels is None:
        return
    if len(labels) != len(sizes):
        raise ModelValidationError(field, f"expected {len(sizes)} label lists, got {len(labels)}")
    for k, (row, n) in enumerate(zip(labels, sizes)):
        if len(row) != n:
            raise ModelValidationError(f"{field}[{k}]", f"expected {n} labels, got {len(row)}")
        seen: dict[str, int] = {}
        for j, label in enumerate(row):
            if not isinstance(label, str):
                raise ModelValidationError(f"{field}[{k}][{j}]", f"label {label!r:.40} is a {type(label).__name__}; "
                                                                  "expected a string")
            if not label.strip():
                raise ModelValidationError(f"{field}[{k}][{j}]", f"label {label!r} is empty; expected a name")
            if "\0" in label:
                raise ModelValidationError(f"{field}[{k}][{j}]", f"label {label!r:.40} holds a NUL character (a ROS "
                                                                  "string ends there); remove it")
            if label in seen:
                raise ModelValidationError(f"{field}[{k}][{j}]", f"label {label!r:.40} repeats {field}[{k}]"
                                                                  f"[{seen[label]}]; labels of one list must differ")
            seen[label] = j


def check_policies_array(field: str, policies: object, num_controls: Sequence[int]) -> np.ndarray:
    """A list of policies as (P, T, F) int64 (C order), refused naming ``field`` (and the entry): its shape, a value
    that is not an integer, a control outside [0, u_f)."""
    arr = np.asarray(policies)
    F = len(num_controls)
    if arr.ndim != 3 or arr.shape[0] < 1 or arr.shape[1] < 1 or arr.shape[2] != F:
        raise ModelValidationError(field, f"expected shape (num_policies >= 1, policy_len >= 1, {F} factors), got "
                                          f"{arr.shape}")
    if arr.shape[0] > MAX_POLICIES:
        raise ModelValidationError(field, f"{arr.shape[0]} policies, more than the limit of {MAX_POLICIES}")
    if not np.issubdtype(arr.dtype, np.integer):
        if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating) \
                or not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise ModelValidationError(field, f"expected integer controls, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    for f, u in enumerate(num_controls):
        bad = (arr[:, :, f] < 0) | (arr[:, :, f] >= u)
        if bad.any():
            p, t = (int(i) for i in np.argwhere(bad)[0])
            raise ModelValidationError(f"{field}[{p}][{t}][{f}]", f"control {arr[p, t, f]} out of range: factor {f} "
                                                                  f"has {u} control(s) (0..{u - 1})")
    return np.ascontiguousarray(arr)


def _check_policy_prior(model: "GenerativeModel") -> None:
    """C (one finite vector (m_i,) per modality), policy_len (>= 1), policies (a valid list, of policy_len steps
    when both are given) and E (finite, non-negative, one entry per policy). E and policies need B."""
    if model.C is not None:
        if len(model.C) != model.num_modalities:
            raise ModelValidationError("C", f"expected one preference vector per modality ({model.num_modalities}), "
                                            f"got {len(model.C)}")
        for i, c in enumerate(model.C):
            name = f"C[{i}]" if not model.modality_names else f"C[{i}] ({model.modality_names[i]})"
            if c.shape != (model.num_obs[i],):
                raise ModelValidationError(name, f"shape {c.shape}, expected ({model.num_obs[i]},): one preference "
                                                 "(log-probability) per observation level")
            if not np.issubdtype(c.dtype, np.number) or np.issubdtype(c.dtype, np.complexfloating):
                raise ModelValidationError(name, f"expected real preferences, got dtype {c.dtype}")
            if not np.all(np.isfinite(c)):
                idx = int(np.argwhere(~np.isfinite(c))[0][0])
                raise ModelValidationError(name, f"non-finite preference {c[idx]} at index {idx}")
    if model.policy_len is not None:
        value = model.policy_len
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ModelValidationError("policy_len", f"expected an integer >= 1 (steps per policy), got {value!r}")
    if model.B is None and (model.E is not None or model.policies is not None):
        raise ModelValidationError("E" if model.E is not None else "policies",
                                   "policies need the model's transitions (B), and this model has none")
    if model.policies is not None:
        model.policies = check_policies_array("policies", model.policies, model.num_controls)
        if model.policy_len is not None and model.policies.shape[1] != model.policy_len:
            raise ModelValidationError("policies", f"{model.policies.shape[1]} steps per policy but policy_len is "
                                                   f"{model.policy_len}")
    elif model.B is not None and (model.policy_len is not None or model.E is not None) \
            and model.num_policies > MAX_POLICIES:  # no policy fields: a model for state inference alone
        raise ModelValidationError("policy_len", f"{model.horizon} steps of the controls {list(model.num_controls)} "
                                                 f"make {model.num_policies:.3g} policies, more than the limit of "
                                                 f"{MAX_POLICIES}")
    if model.E is not None:
        E = model.E
        if E.shape != (model.num_policies,):
            raise ModelValidationError("E", f"shape {E.shape}, expected ({model.num_policies},): one prior "
                                            f"probability per policy ({model.horizon} step(s) of the controls "
                                            f"{list(model.num_controls)})")
        _check_finite_nonnegative("E", E)


def validate_model(model: "GenerativeModel", atol: float = 1e-4) -> None:
    """Check shapes against dependency lists, values and normalisation. A factor that no modality observes is
    valid (pymdp runs it: FPI keeps its prior, VMP/MMP follow its dynamics); its size comes from B or D.

    Raises :class:`ModelValidationError` on the first problem found.
    """
    A, B, D = model.A, model.B, model.D
    if len(A) == 0:
        raise ModelValidationError("A", "at least one observation modality is required")
    if len(model.A_dependencies) != len(A):
        raise ModelValidationError(
            "A_dependencies", f"expected one dependency list per modality ({len(A)}), got {len(model.A_dependencies)}"
        )
    if B is not None and D is not None and len(B) != len(D):
        raise ModelValidationError("B", f"expected one transition tensor per factor ({len(D)} priors in D), got {len(B)}")
    num_states = model.num_states
    F = len(num_states)
    if F == 0:
        raise ModelValidationError("A_dependencies", "the model has no hidden-state factors")
    _check_deps("A_dependencies", model.A_dependencies, F)
    if B is not None and len(B) != F:
        raise ModelValidationError("B", f"expected one transition tensor per factor ({F}), got {len(B)}")
    if len(model.B_dependencies) != F:
        raise ModelValidationError(
            "B_dependencies", f"expected one dependency list per factor ({F}), got {len(model.B_dependencies)}"
        )
    _check_deps("B_dependencies", model.B_dependencies, F)

    _check_names("factor_names", model.factor_names, F)
    _check_names("modality_names", model.modality_names, len(A))
    observed = {f for deps in model.A_dependencies for f in deps}
    for f, n in enumerate(num_states):
        if n < 1 and f not in observed and B is None and D is None:
            raise ModelValidationError(f"D[{f}]", f"factor {f} is observed by no modality and the model has no B, so "
                                                  f"nothing gives its size: give its prior D[{f}] (or B)")
        if n < 1:
            raise ModelValidationError(f"num_states[{f}]", f"factor {f} has {n} levels; at least 1 is required")

    for i, (a, deps) in enumerate(zip(A, model.A_dependencies)):
        name = f"A[{i}]" if not model.modality_names else f"A[{i}] ({model.modality_names[i]})"
        _check_rank(name, a, f"A_dependencies[{i}]", deps, 1, "observation axis + one per factor")
        if a.shape[0] < 1:
            raise ModelValidationError(name, "axis 0 (observation levels) is empty")
        _check_dependency_axes(name, a, deps, num_states)
        _check_distributions(name, a, atol)

    if B is not None:
        for f, (b, deps) in enumerate(zip(B, model.B_dependencies)):
            name = f"B[{f}]" if not model.factor_names else f"B[{f}] ({model.factor_names[f]})"
            _check_rank(name, b, f"B_dependencies[{f}]", deps, 2, "next state + one per dependency + controls")
            if b.shape[0] != num_states[f]:
                raise ModelValidationError(name, f"axis 0 has length {b.shape[0]}, expected {num_states[f]}")
            _check_dependency_axes(name, b, deps, num_states)
            if b.shape[-1] < 1:
                raise ModelValidationError(name, "the control axis (last) is empty")
            _check_distributions(name, b, atol)

    if D is None or len(D) != F:
        raise ModelValidationError("D", f"expected one prior per factor ({F}), got {0 if D is None else len(D)}")
    for f, d in enumerate(D):
        name = f"D[{f}]"
        if d.shape != (num_states[f],):
            raise ModelValidationError(name, f"shape {d.shape}, expected ({num_states[f]},)")
        _check_distributions(name, d, atol)

    _check_labels("state_labels", model.state_labels, num_states)
    _check_labels("observation_labels", model.observation_labels, model.num_obs)
    _check_labels("control_labels", model.control_labels, model.num_controls)
    _check_policy_prior(model)
