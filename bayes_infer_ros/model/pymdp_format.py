"""A pymdp model saved from Python (one ``.npz``, no pickle) -> :class:`GenerativeModel`.

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
from .validation import ModelValidationError

PathLike = Union[str, os.PathLike]
_INDEXED = re.compile(r"^([ABD])(\d+)$")
OPTIONAL_KEYS = ("A_dependencies", "B_dependencies", "names")
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
    if not A:
        raise ModelValidationError("A0", f"missing in {path.name}: no A arrays (keys A0, A1, ...); " + HOW_TO_SAVE)
    for letter, arrs in (("A", A), ("B", B), ("D", D)):
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
    model = GenerativeModel(
        A=[np.asarray(a, dtype=np.float64) for a in A], A_dependencies=A_deps,
        B=[np.asarray(b, dtype=np.float64) for b in B] if B else None, B_dependencies=B_deps,
        D=[np.asarray(d, dtype=np.float64) for d in D] if D else None,
        factor_names=factor_names or names.get("factors"), modality_names=modality_names or names.get("modalities"),
        state_labels=names.get("states"), observation_labels=names.get("observations"),
        control_labels=names.get("controls") if B else None,
    )
    return model.validate()
