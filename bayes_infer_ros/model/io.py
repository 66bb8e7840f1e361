"""Load and save models: ``.npz`` and ROS 2 parameter YAML (the file the node reads).

Parameter layout (nested YAML under ``/**: ros__parameters: model:``, flat dotted names in ROS):

    model.factors                  string[]  factor names (F)
    model.modalities               string[]  modality names (M)
    model.A.<modality>.shape       int[]     (m_i, n_deps...)
    model.A.<modality>.data        double[]  A_i flattened in C order
    model.A.<modality>.dependencies int[]    factor indices (pymdp A_dependencies[i])
    model.A.<modality>.labels      string[]  optional observation-level labels
    model.B.<factor>.shape         int[]     (n_f, n_deps..., u_f)
    model.B.<factor>.data          double[]
    model.B.<factor>.dependencies  int[]     optional, default [f]
    model.B.<factor>.controls      string[]  optional control labels
    model.D.<factor>               double[]  optional prior, default uniform
    model.states.<factor>          string[]  optional state labels
    model.C.<modality>             double[]  optional preferences over its m_i levels (pymdp's C, log-probabilities)
    model.E                        double[]  optional prior over the policies (one entry per policy)
    policy.len                     int       optional steps per policy (pymdp's policy_len, default 1; 0: not
                                             given, the node parameter's default)
    policy.policies                int[]     optional list of policies, (P, policy.len, F) flattened in C order
                                             (default: every combination of the factors' controls)

``policy.len`` and ``policy.policies`` are node parameters (docs/policy.md) read with the model: ``model.E`` has
one entry per policy, so the policies decide its length.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np
import yaml

from . import limits
from .generative_model import GenerativeModel
from .validation import ModelValidationError

PathLike = Union[str, os.PathLike]
MODEL_PREFIX = "model."
POLICY_LEN = "policy.len"
POLICIES = "policy.policies"


# ---- flat parameter dictionaries ---------------------------------------------------------------
def model_to_parameters(model: GenerativeModel) -> dict[str, Any]:
    """Flat ``{dotted_name: value}`` parameters (without the ``model.`` prefix stripped)."""
    factors = [model.factor_name(f) for f in range(model.num_factors)]
    modalities = [model.modality_name(i) for i in range(model.num_modalities)]
    p: dict[str, Any] = {"model.factors": factors, "model.modalities": modalities}
    for i, (a, deps) in enumerate(zip(model.A, model.A_dependencies)):
        key = f"model.A.{modalities[i]}"
        p.update(_tensor_parameters(key, a, deps))
        if model.observation_labels:
            p[f"{key}.labels"] = list(model.observation_labels[i])
    if model.B is not None:
        for f, (b, deps) in enumerate(zip(model.B, model.B_dependencies)):
            key = f"model.B.{factors[f]}"
            p.update(_tensor_parameters(key, b, deps))
            if model.control_labels:
                p[f"{key}.controls"] = list(model.control_labels[f])
    for f, d in enumerate(model.D):
        p[f"model.D.{factors[f]}"] = [float(v) for v in np.asarray(d, dtype=np.float64)]
    if model.state_labels:
        for f in range(model.num_factors):
            p[f"model.states.{factors[f]}"] = list(model.state_labels[f])
    if model.C is not None:
        for i, c in enumerate(model.C):
            p[f"model.C.{modalities[i]}"] = [float(v) for v in np.asarray(c, dtype=np.float64)]
    if model.E is not None:
        p["model.E"] = [float(v) for v in np.asarray(model.E, dtype=np.float64)]
    if model.policy_len is not None or model.policies is not None:
        p[POLICY_LEN] = model.horizon
    if model.policies is not None:
        p[POLICIES] = [int(v) for v in np.asarray(model.policies).ravel()]
    return p


def _tensor_parameters(key: str, x: np.ndarray, deps: Sequence[int]) -> dict[str, Any]:
    """``{key}.shape``, ``{key}.data`` (row-major, float64) and ``{key}.dependencies`` of one A or B tensor."""
    return {
        f"{key}.shape": [int(s) for s in x.shape],
        f"{key}.data": [float(v) for v in np.asarray(x, dtype=np.float64).ravel()],
        f"{key}.dependencies": [int(d) for d in deps],
    }


def _get(params: Mapping[str, Any], key: str, kind: str, required: bool = True) -> Any:
    if key not in params:
        if required:
            raise ModelValidationError(key, f"missing; expected {kind}")
        return None
    return params[key]


def _as_int_list(key: str, value: Any) -> list[int]:
    try:
        out = [int(v) for v in value]
    except (TypeError, ValueError):
        raise ModelValidationError(key, f"expected a list of integers, got {value!r:.80}") from None
    if any(float(v) != o for v, o in zip(value, out)):
        raise ModelValidationError(key, f"expected integers, got {list(value)!r:.80}")
    return out


def _as_float_list(key: str, value: Any) -> np.ndarray:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, np.ndarray)):
        raise ModelValidationError(key, f"expected a list of numbers, got {value!r:.80}")
    try:
        return np.asarray(value, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise ModelValidationError(key, f"expected a list of numbers, got {value!r:.80}") from None


def _as_tensor(key: str, shape: list[int], data: Any) -> np.ndarray:
    if any(s < 1 for s in shape):
        raise ModelValidationError(f"{key}.shape", f"every axis length must be >= 1, got {shape}")
    expected = limits.check_elements(f"{key}.shape", shape)
    try:
        flat = np.asarray(data, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise ModelValidationError(f"{key}.data", "expected a list of numbers") from None
    if flat.size != expected:
        raise ModelValidationError(
            f"{key}.data", f"has {flat.size} values but shape {shape} needs {expected} (C order, flattened)"
        )
    return flat.reshape(shape)


def _tensor_from_parameters(params: Mapping[str, Any], key: str, axes: str) -> np.ndarray:
    """The tensor stored as ``{key}.shape`` (an integer list ``axes``) and ``{key}.data``."""
    shape = _as_int_list(f"{key}.shape", _get(params, f"{key}.shape", f"an integer list {axes}"))
    return _as_tensor(key, shape, _get(params, f"{key}.data", "a flat list of probabilities"))


def _factor_sizes(model: GenerativeModel, factors: Sequence[str], D: Sequence[Optional[np.ndarray]]) -> list[int]:
    """Each factor's size: from its B when the model has B, else from its prior ``model.D.<factor>``, else from
    the A tensors that depend on it; a factor that nothing sizes is refused naming its prior."""
    if model.B is not None:
        num_states = list(model.num_states)
        if len(num_states) != len(factors):
            raise ModelValidationError(
                "model.factors", f"{len(factors)} factor names but the tensors define {len(num_states)} factors")
        return num_states
    from_A = model.num_states  # from A's dependency axes (D is not set yet): 0 where no modality observes the factor
    sizes = []
    for f, name in enumerate(factors):
        if D[f] is not None:
            sizes.append(int(np.size(D[f])))
        elif f < len(from_A) and from_A[f] > 0:
            sizes.append(from_A[f])
        else:
            raise ModelValidationError(f"{MODEL_PREFIX}D.{name}", f"factor '{name}' is observed by no modality and "
                                       "the model has no B, so nothing gives its size: give its prior")
    return sizes


def model_from_parameters(params: Mapping[str, Any]) -> GenerativeModel:
    """Build (and validate) a model from flat dotted parameters (see module docstring)."""
    factors = _get(params, "model.factors", "a list of factor names")
    modalities = _get(params, "model.modalities", "a list of modality names")
    if not isinstance(factors, (list, tuple)) or not factors:
        raise ModelValidationError("model.factors", "expected a non-empty list of factor names")
    if not isinstance(modalities, (list, tuple)) or not modalities:
        raise ModelValidationError("model.modalities", "expected a non-empty list of modality names")
    factors = [str(x) for x in factors]
    modalities = [str(x) for x in modalities]

    A, A_deps, obs_labels = [], [], []
    for name in modalities:
        key = f"{MODEL_PREFIX}A.{name}"
        A.append(_tensor_from_parameters(params, key, "(m_i, n_deps...)"))
        A_deps.append(_as_int_list(f"{key}.dependencies", _get(params, f"{key}.dependencies", "a list of factor indices")))
        obs_labels.append(limits.label_list(f"{key}.labels", _get(params, f"{key}.labels", "", required=False)))

    has_B = any(f"{MODEL_PREFIX}B.{name}.shape" in params for name in factors)
    B: Optional[list[np.ndarray]] = [] if has_B else None
    B_deps, ctrl_labels = [], []
    for f, name in enumerate(factors):
        key = f"{MODEL_PREFIX}B.{name}"
        if has_B:
            B.append(_tensor_from_parameters(params, key, "(n_f, n_deps..., u_f)"))
        deps = _get(params, f"{key}.dependencies", "", required=False)
        B_deps.append([f] if deps is None else _as_int_list(f"{key}.dependencies", deps))
        ctrl_labels.append(limits.label_list(f"{key}.controls", _get(params, f"{key}.controls", "", required=False)))

    D = []
    for name in factors:
        d = _get(params, f"{MODEL_PREFIX}D.{name}", "", required=False)
        D.append(None if d is None else np.asarray(d, dtype=np.float64))
    state_labels = [limits.label_list(f"{MODEL_PREFIX}states.{name}", _get(params, f"{MODEL_PREFIX}states.{name}", "", required=False))
                    for name in factors]

    C = [_get(params, f"{MODEL_PREFIX}C.{name}", "", required=False) for name in modalities]
    if any(c is not None for c in C):
        missing = [name for name, c in zip(modalities, C) if c is None]
        if missing:
            raise ModelValidationError(f"{MODEL_PREFIX}C.{missing[0]}", "missing: give every modality's preferences "
                                       "once one is given (zeros: no preference)")
        C = [_as_float_list(f"{MODEL_PREFIX}C.{name}", c) for name, c in zip(modalities, C)]
    else:
        C = None
    E = _get(params, f"{MODEL_PREFIX}E", "", required=False)
    policy_len = _get(params, POLICY_LEN, "", required=False)
    if policy_len is not None:
        if isinstance(policy_len, bool) or not isinstance(policy_len, (int, np.integer)) or policy_len < 0:
            raise ModelValidationError(POLICY_LEN, f"expected an integer >= 1 (steps per policy; 0: not given), got "
                                                   f"{policy_len!r}")
        policy_len = int(policy_len) or None
    policies = _get(params, POLICIES, "", required=False)
    if policies is not None and len(policies) == 0:  # an empty list (the parameter's default): every combination
        policies = None
    if policies is not None:
        flat = _as_int_list(POLICIES, policies)
        steps, F = policy_len or 1, len(factors)
        if not flat or len(flat) % (steps * F):
            raise ModelValidationError(POLICIES, f"has {len(flat)} values: expected a multiple of {POLICY_LEN} x "
                                                 f"factors = {steps} x {F} (policies flattened as (P, {steps}, {F}))")
        policies = np.asarray(flat, np.int64).reshape(-1, steps, F)

    model = GenerativeModel(
        A=A,
        A_dependencies=A_deps,
        B=B,
        B_dependencies=B_deps,
        D=None,
        factor_names=factors,
        modality_names=modalities,
        C=C,
        E=None if E is None else _as_float_list(f"{MODEL_PREFIX}E", E),
        policy_len=policy_len,
        policies=policies,
    )
    num_states = _factor_sizes(model, factors, D)
    model.D = [np.full(n, 1.0 / n) if d is None else d for d, n in zip(D, num_states)]
    model.state_labels = [list(x) for x in state_labels] if all(x is not None for x in state_labels) else None
    model.observation_labels = [list(x) for x in obs_labels] if all(x is not None for x in obs_labels) else None
    if has_B and all(x is not None for x in ctrl_labels):
        model.control_labels = [list(x) for x in ctrl_labels]
    return model.validate()


# ---- params YAML -------------------------------------------------------------------------------
def flatten_parameters(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested YAML mapping -> flat dotted names, as ROS 2 reads a params file."""
    out: dict[str, Any] = {}
    for k, v in tree.items():
        name = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten_parameters(v, name + "."))
        else:
            out[name] = v
    return out


def unflatten_parameters(flat: Mapping[str, Any]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for key, value in flat.items():
        node = tree
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return tree


def read_parameters_yaml(path: PathLike, node_name: Optional[str] = None) -> dict[str, Any]:
    """Flat parameters of one node section (``/**`` or ``node_name``) of a ROS 2 params file."""
    path = Path(path)
    if not path.is_file():
        raise ModelValidationError("model_file", f"{path} does not exist or is not a file")
    limits.check_file_size(path, limits.MAX_YAML_BYTES)
    try:
        doc = limits.safe_load_strict(path.read_text())
    except ModelValidationError as exc:
        raise ModelValidationError("model_file", f"{path}: {exc.reason}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ModelValidationError("model_file", f"{path} is not valid YAML: {exc}") from None
    if not isinstance(doc, Mapping):
        raise ModelValidationError("model_file", f"{path}: expected a mapping of node names to 'ros__parameters'")
    flat: dict[str, Any] = {}
    for section, body in doc.items():
        if not isinstance(body, Mapping) or "ros__parameters" not in body:
            continue
        name = str(section).strip("/")
        if section in ("/**", "**") or node_name is None or name.split("/")[-1] == node_name:
            flat.update(flatten_parameters(body["ros__parameters"] or {}))
    if not flat:
        raise ModelValidationError("model_file", f"{path}: no '/**: ros__parameters:' section found")
    return flat


def save_parameters_yaml(
    model: GenerativeModel, path: PathLike, extra_parameters: Optional[Mapping[str, Any]] = None
) -> None:
    """Write a ROS 2 params file (``/**: ros__parameters:``) holding the model and extra node parameters."""
    flat = dict(extra_parameters or {})
    flat.update(model_to_parameters(model))
    doc = {"/**": {"ros__parameters": unflatten_parameters(flat)}}
    Path(path).write_text(yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=120))


# ---- npz ---------------------------------------------------------------------------------------
def save_npz(model: GenerativeModel, path: PathLike) -> None:
    """Arrays as ``A_i``, ``B_f``, ``D_f``; structure and names as a JSON string ``meta``."""
    meta = {
        "A_dependencies": [list(d) for d in model.A_dependencies],
        "B_dependencies": [list(d) for d in model.B_dependencies],
        "has_B": model.B is not None,
        "factor_names": model.factor_names,
        "modality_names": model.modality_names,
        "state_labels": model.state_labels,
        "observation_labels": model.observation_labels,
        "control_labels": model.control_labels,
        "policy_len": model.policy_len,
    }
    arrays = {f"A_{i}": a for i, a in enumerate(model.A)}
    if model.B is not None:
        arrays.update({f"B_{f}": b for f, b in enumerate(model.B)})
    arrays.update({f"D_{f}": d for f, d in enumerate(model.D)})
    if model.C is not None:
        arrays.update({f"C_{i}": c for i, c in enumerate(model.C)})
    if model.E is not None:
        arrays["E"] = model.E
    if model.policies is not None:
        arrays["policies"] = np.asarray(model.policies, np.int64)
    np.savez_compressed(path, meta=np.array(json.dumps(meta)), **arrays)


def load_npz(path: PathLike, validate: bool = True) -> GenerativeModel:
    path = Path(path)
    if not path.is_file():
        raise ModelValidationError("model_file", f"{path} does not exist or is not a file")
    limits.check_file_size(path, limits.MAX_FILE_BYTES)
    limits.check_npz(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            A = [z[f"A_{i}"] for i in range(len(meta["A_dependencies"]))]
            F = len(meta["B_dependencies"])
            B = [z[f"B_{f}"] for f in range(F)] if meta["has_B"] else None
            D = [z[f"D_{f}"] for f in range(F)]
            C = [z[f"C_{i}"] for i in range(len(A))] if "C_0" in z.files else None
            E = z["E"] if "E" in z.files else None
            policies = z["policies"] if "policies" in z.files else None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ModelValidationError("model_file", f"{path} is not a bayes_infer_ros model npz: {exc}") from None
    model = GenerativeModel(
        A=A,
        A_dependencies=meta["A_dependencies"],
        B=B,
        B_dependencies=meta["B_dependencies"],
        D=D,
        factor_names=meta.get("factor_names"),
        modality_names=meta.get("modality_names"),
        state_labels=limits.label_lists("state_labels", meta.get("state_labels")),
        observation_labels=limits.label_lists("observation_labels", meta.get("observation_labels")),
        control_labels=limits.label_lists("control_labels", meta.get("control_labels")),
        C=C,
        E=E,
        policy_len=meta.get("policy_len"),
        policies=policies,
    )
    return model.validate() if validate else model


def load_model(path: PathLike, node_name: Optional[str] = None) -> GenerativeModel:
    """Load a validated model from ``.npz`` or a ROS 2 params ``.yaml``/``.yml`` file."""
    suffix = Path(path).suffix.lower()
    if suffix == ".npz":
        return load_npz(path)
    if suffix in (".yaml", ".yml"):
        return model_from_parameters(read_parameters_yaml(path, node_name))
    raise ModelValidationError("model_file", f"{path}: unknown format {suffix!r}; expected .npz, .yaml or .yml")


def save_model(model: GenerativeModel, path: PathLike) -> None:
    suffix = Path(path).suffix.lower()
    if suffix == ".npz":
        save_npz(model, path)
    elif suffix in (".yaml", ".yml"):
        save_parameters_yaml(model, path)
    else:
        raise ModelValidationError("model_file", f"{path}: unknown format {suffix!r}; expected .npz, .yaml or .yml")
