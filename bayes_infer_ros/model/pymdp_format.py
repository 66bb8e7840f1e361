"""A pymdp model saved from Python (one ``.npz``, no pickle) -> :class:`GenerativeModel` (and its policy settings).

The file a pymdp user writes, in two lines (``A``, ``B``, ``D`` and the dependency lists as in pymdp)::

    import json, numpy as np
    np.savez("my_model.npz", **{f"A{i}": a for i, a in enumerate(A)}, **{f"B{f}": b for f, b in enumerate(B)},
             **{f"D{f}": d for f, d in enumerate(D)},
             A_dependencies=json.dumps(A_dependencies), B_dependencies=json.dumps(B_dependencies))

Keys:
    A0 .. A{M-1}      (m_i, n_deps...)          required, one per modality
    B0 .. B{F-1}      (n_f, n_deps..., u_f)     optional (without B: fpi only)
    D0 .. D{F-1}      (n_f,)                    optional, uniform when absent
    A_dependencies    JSON list of int lists    optional, pymdp's default: every modality sees every factor
    B_dependencies    JSON list of int lists    optional, pymdp's default: [[0], [1], ...]
    names             JSON object               optional: {"factors": [...], "modalities": [...], "states": [[...]],
                                                "observations": [[...]], "controls": [[...]]}
    C0 .. C{M-1}      (m_i,)                    optional preferences over observations (pymdp's C)
    E                 (num_policies,)           optional prior over policies (pymdp's E)
    policy_len        int                       optional steps per policy (pymdp's policy_len, default 1)
    policies          (P, T, F) int             optional list of policies (pymdp's ``agent.policies.policy_arr``;
                                                dropped when it is the default list of ``policy_len`` steps)
    gamma, alpha      float                     optional -> node parameters policy.gamma, policy.alpha
    use_utility, use_states_info_gain  bool     optional -> policy.terms
    action_selection  str                       optional -> policy.selection ("deterministic" | "stochastic")
    sampling_mode     str                       optional -> policy.sampling_mode ("full" | "marginal")

From a live pymdp 1.x ``Agent``, :func:`pymdp_agent_arrays` gives every key at once:
``np.savez("agent.npz", **pymdp_agent_arrays(agent))``. The policy settings are node parameters, not model
arrays: :func:`read_pymdp_file` returns them beside the model (``bayes-infer model from-pymdp`` writes them into
the params YAML).

A leading batch axis (pymdp 1.x ``Agent`` keeps ``A[i]`` as ``(batch, m_i, ...)``) is recognised from ``D``
(2-D) or from ``A0`` having one axis more than its dependencies need; ``batch_index`` picks the agent.
``np.savez(path, A=np.array(A, dtype=object))`` does not work: object arrays need pickle, which this loader
refuses (a model file must not run code). JAX arrays are fine (``np.savez`` converts them).
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from .generative_model import GenerativeModel
from .policies import construct_policies, num_policies
from .validation import ModelValidationError

PathLike = Union[str, os.PathLike]
_INDEXED = re.compile(r"^([ABCD])(\d+)$")
#: The policy settings an export may carry, by key, and the node parameter each becomes.
SETTING_KEYS = {"gamma": "policy.gamma", "alpha": "policy.alpha", "action_selection": "policy.selection",
                "sampling_mode": "policy.sampling_mode", "use_utility": "policy.terms",
                "use_states_info_gain": "policy.terms", "use_param_info_gain": "policy.terms"}
OPTIONAL_KEYS = ("A_dependencies", "B_dependencies", "names", "E", "policy_len", "policies") + tuple(SETTING_KEYS)
HOW_TO_SAVE = ("save one array per key: np.savez(path, **{f\"A{i}\": a for i, a in enumerate(A)}, ...) "
               "(docs/your-model.md)")


def _indexed(arrays: dict[str, np.ndarray], letter: str, path: Path) -> list[np.ndarray]:
    found = {int(m.group(2)): arrays[k] for k in arrays if (m := _INDEXED.match(k)) and m.group(1) == letter}
    if not found:
        return []
    missing = [i for i in range(max(found) + 1) if i not in found]
    if missing:
        raise ModelValidationError(f"{letter}{missing[0]}", f"missing in {path.name}: keys {letter}0..{letter}{max(found)} "
                                                            f"must all be there (found {sorted(found)})")
    return [np.asarray(found[i]) for i in range(len(found))]


def _json_entry(arrays: dict[str, np.ndarray], key: str) -> Any:
    if key not in arrays:
        return None
    value = arrays[key]
    if value.dtype.kind in "iu":  # a rectangular dependency list saved as an int array
        return value.tolist()
    try:
        return json.loads(str(value))
    except json.JSONDecodeError as exc:
        raise ModelValidationError(key, f"expected a JSON string (json.dumps(...)), got {str(value)[:80]!r}: {exc}") from None


def _deps(key: str, value: Any, count: int) -> Optional[list[list[int]]]:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != count or not all(isinstance(row, list) for row in value):
        raise ModelValidationError(key, f"expected a list of {count} lists of factor indices, got {value!r:.120}")
    try:
        return [[int(d) for d in row] for row in value]
    except (TypeError, ValueError):
        raise ModelValidationError(key, f"expected integer factor indices, got {value!r:.120}") from None


def read_pymdp_npz(path: PathLike, batch_index: int = 0, factor_names: Optional[list[str]] = None,
                   modality_names: Optional[list[str]] = None) -> GenerativeModel:
    """Read and validate a pymdp export (see the module docstring). Errors name the key and the problem."""
    return read_pymdp_file(path, batch_index, factor_names, modality_names)[0]


def _scalar(arrays: dict[str, np.ndarray], key: str, batch_index: int) -> Any:
    """A scalar setting, or agent ``batch_index``'s entry of a per-agent (batch,) array."""
    value = np.asarray(arrays[key])
    if value.ndim == 1 and value.size > 1:
        if not 0 <= batch_index < value.size:
            raise ModelValidationError(key, f"batch index {batch_index} out of range: the leading (batch) axis has "
                                            f"length {value.size}")
        value = value[batch_index]
    elif value.size != 1:
        raise ModelValidationError(key, f"expected a scalar (or one per agent), got shape {value.shape}")
    return value.reshape(()).item()


def _policy_settings(arrays: dict[str, np.ndarray], batch_index: int) -> dict[str, Any]:
    """The ``policy.*`` node parameters of the export's settings (only those it holds)."""
    out: dict[str, Any] = {}
    for key in ("gamma", "alpha"):
        if key in arrays:
            value = _scalar(arrays, key, batch_index)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
                raise ModelValidationError(key, f"expected a finite number, got {value!r:.40}")
            out[SETTING_KEYS[key]] = float(value)
    choices = (("action_selection", ("deterministic", "stochastic")), ("sampling_mode", ("full", "marginal")))
    for key, allowed in choices:
        if key in arrays:
            value = str(_scalar(arrays, key, batch_index))
            if value not in allowed:
                raise ModelValidationError(key, f"expected one of {list(allowed)}, got {value!r:.40}")
            out[SETTING_KEYS[key]] = value
    flags = {k: bool(_scalar(arrays, k, batch_index)) for k in ("use_utility", "use_states_info_gain",
                                                               "use_param_info_gain") if k in arrays}
    if flags.get("use_param_info_gain"):
        raise ModelValidationError("use_param_info_gain", "parameter information gain needs Dirichlet parameters "
                                                          "(pA / pB), which model files do not carry: export the agent "
                                                          "with use_param_info_gain=False")
    if "use_utility" in flags or "use_states_info_gain" in flags:
        out["policy.terms"] = [t for t, k in (("utility", "use_utility"), ("states_info_gain", "use_states_info_gain"))
                               if flags.get(k, True)]
    return out


def read_pymdp_file(path: PathLike, batch_index: int = 0, factor_names: Optional[list[str]] = None,
                    modality_names: Optional[list[str]] = None) -> tuple[GenerativeModel, dict[str, Any]]:
    """Read and validate a pymdp export: (the model, its policy settings as ``policy.*`` node parameters, only
    those the file holds). Errors name the key and the problem."""
    path = Path(path)
    if not path.is_file():
        raise ModelValidationError("file", f"{path} does not exist or is not a file")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except ValueError as exc:
        if "allow_pickle" in str(exc):
            raise ModelValidationError("file", f"{path.name} holds object arrays (they need pickle, refused); "
                                               + HOW_TO_SAVE) from None
        raise ModelValidationError("file", f"{path.name} is not an .npz file numpy can read: {exc}") from None
    except OSError as exc:
        raise ModelValidationError("file", f"{path.name} is not an .npz file numpy can read: {exc}") from None
    if "meta" in arrays and "A_0" in arrays:
        raise ModelValidationError("file", f"{path.name} is already a bayes_infer_ros model npz: use it as it is")
    unknown = sorted(k for k in arrays if not _INDEXED.match(k) and k not in OPTIONAL_KEYS)
    if unknown:
        raise ModelValidationError(unknown[0], f"unknown key in {path.name} (expected A0.., B0.., D0.., "
                                               f"{', '.join(OPTIONAL_KEYS)})")
    A, B, D = _indexed(arrays, "A", path), _indexed(arrays, "B", path), _indexed(arrays, "D", path)
    C = _indexed(arrays, "C", path)
    if not A:
        raise ModelValidationError("A0", f"missing in {path.name}: no A arrays (keys A0, A1, ...); " + HOW_TO_SAVE)
    for letter, arrs in (("A", A), ("B", B), ("D", D), ("C", C)):
        for i, a in enumerate(arrs):
            if a.dtype == object or not np.issubdtype(a.dtype, np.number):
                raise ModelValidationError(f"{letter}{i}", f"expected a numeric array, got dtype {a.dtype}")
    A_deps = _deps("A_dependencies", _json_entry(arrays, "A_dependencies"), len(A))
    names = _json_entry(arrays, "names") or {}
    if not isinstance(names, dict):
        raise ModelValidationError("names", "expected a JSON object with factors/modalities/states/observations/controls")

    batched = (bool(D) and D[0].ndim == 2) or (A_deps is not None and A[0].ndim == len(A_deps[0]) + 2)
    if batched:
        def pick(letter: str, arrs: list[np.ndarray]) -> list[np.ndarray]:
            out = []
            for i, a in enumerate(arrs):
                if not 0 <= batch_index < a.shape[0]:
                    raise ModelValidationError(f"{letter}{i}", f"batch index {batch_index} out of range: the leading "
                                                               f"(batch) axis has length {a.shape[0]}")
                out.append(a[batch_index])
            return out
        A, B, D = pick("A", A), pick("B", B), pick("D", D)
        C = pick("C", C) if C and C[0].ndim >= 2 else C
    F = len(B) if B else (len(D) if D else None)
    if A_deps is None:
        if F is None:
            F = A[0].ndim - 1
        A_deps = [list(range(F)) for _ in A]
    if F is None:
        F = 1 + max(max(row) for row in A_deps)
    B_deps = _deps("B_dependencies", _json_entry(arrays, "B_dependencies"), F)
    if D and len(D) != F:
        raise ModelValidationError("D", f"{len(D)} priors (D0..) but the model has {F} factors")
    if C and len(C) != len(A):
        raise ModelValidationError("C", f"{len(C)} preference vectors (C0..) but the model has {len(A)} modalities")
    for i, c in enumerate(C):
        if c.ndim != 1:
            raise ModelValidationError(f"C{i}", f"shape {c.shape}: expected ({A[i].shape[0]},), one preference per "
                                                "level (pymdp's time-indexed C (policy_len, m_i) is not supported)")
    E = arrays.get("E")
    if E is not None:
        E = np.asarray(E, dtype=np.float64)
        if E.ndim == 2:
            if not 0 <= batch_index < E.shape[0]:
                raise ModelValidationError("E", f"batch index {batch_index} out of range: the leading (batch) axis "
                                                f"has length {E.shape[0]}")
            E = E[batch_index]
    policy_len = None
    if "policy_len" in arrays:
        value = _scalar(arrays, "policy_len", batch_index)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ModelValidationError("policy_len", f"expected an integer >= 1, got {value!r:.40}")
        policy_len = value
    policies = arrays.get("policies")
    model = GenerativeModel(
        A=[np.asarray(a, dtype=np.float64) for a in A], A_dependencies=A_deps,
        B=[np.asarray(b, dtype=np.float64) for b in B] if B else None, B_dependencies=B_deps,
        D=[np.asarray(d, dtype=np.float64) for d in D] if D else None,
        factor_names=factor_names or names.get("factors"), modality_names=modality_names or names.get("modalities"),
        state_labels=names.get("states"), observation_labels=names.get("observations"),
        control_labels=names.get("controls") if B else None,
        C=[np.asarray(c, dtype=np.float64) for c in C] if C else None, E=E, policy_len=policy_len,
        policies=policies,
    )
    model.validate()
    if model.policies is not None and num_policies(model.num_controls, model.horizon) == len(model.policies):
        default = construct_policies(model.num_controls, model.horizon, "policies")
        if np.array_equal(default, model.policies):
            model.policy_len, model.policies = model.horizon, None  # the default list: its length says it all
    return model, _policy_settings(arrays, batch_index)


def pymdp_agent_arrays(agent: Any) -> dict[str, np.ndarray]:
    """The export of a pymdp 1.x ``Agent`` (read by attribute; pymdp is not imported): every key of the module
    docstring, batched as the agent holds its arrays. ``np.savez(path, **pymdp_agent_arrays(agent))``."""
    if getattr(agent, "action_maps", None) is not None:
        raise ModelValidationError("B_action_dependencies", "agents whose controls drive several factors (pymdp's "
                                                            "B_action_dependencies) are not supported")
    if getattr(agent, "use_inductive", False):
        raise ModelValidationError("use_inductive", "inductive planning is not supported: export the agent with "
                                                    "use_inductive=False")
    out: dict[str, Any] = {}
    for letter in "ABCD":
        for i, x in enumerate(getattr(agent, letter)):
            out[f"{letter}{i}"] = np.asarray(x)
    out["E"] = np.asarray(agent.E)
    out["A_dependencies"] = json.dumps([[int(d) for d in row] for row in agent.A_dependencies])
    out["B_dependencies"] = json.dumps([[int(d) for d in row] for row in agent.B_dependencies])
    out["policy_len"] = np.asarray(int(agent.policies.horizon))
    out["policies"] = np.asarray(agent.policies.policy_arr, np.int64)
    out["gamma"], out["alpha"] = np.asarray(agent.gamma, np.float64), np.asarray(agent.alpha, np.float64)
    for key in ("use_utility", "use_states_info_gain", "use_param_info_gain"):
        out[key] = np.asarray(bool(getattr(agent, key)))
    out["action_selection"] = np.asarray(str(agent.action_selection))
    out["sampling_mode"] = np.asarray(str(agent.sampling_mode))
    return out
