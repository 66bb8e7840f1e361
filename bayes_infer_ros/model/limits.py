"""Size limits and strict parsing for model files: what a careless or hostile file cannot make the loader do.

- ``MAX_FILE_BYTES``: a model file larger than this is refused before it is read (YAML has its own, lower
  ``MAX_YAML_BYTES``: PyYAML holds a document several times its size in memory while it parses).
- ``MAX_ELEMENTS``: the tensors of one model hold at most this many numbers in all. A YAML document is counted
  while it is composed (before any list is built); an npz is counted from its array headers (before any array
  is decompressed), and a ``shape`` parameter is checked before its data is reshaped.
- YAML aliases (``*name``) are refused: a few kilobytes of nested aliases expand to gigabytes.
- ``MAX_YAML_DEPTH``: sequences and mappings nest at most this deep in a YAML document (checked while the
  events stream, before anything is built): libyaml's loader recurses once per level and tens of thousands of
  levels overflow the C stack (SIGSEGV). A model needs one level per tensor axis plus a few for its mappings.
- Labels (state, observation and control names) are strings after loading: integers are written as their
  decimal text; booleans, floats, ``null`` and containers are refused naming the label (YAML 1.1 reads
  ``on``/``off``/``yes``/``no`` as booleans: quote them).
"""
from __future__ import annotations

import math
import os
import zipfile
from typing import Any, Optional, Sequence

import numpy as np
import yaml

from .validation import ModelValidationError

MAX_FILE_BYTES = 256 * 2**20
MAX_YAML_BYTES = 16 * 2**20
MAX_ELEMENTS = 50_000_000
MAX_YAML_DEPTH = 100


def check_file_size(path: os.PathLike, limit: int) -> None:
    size = os.path.getsize(path)
    if size > limit:
        raise ModelValidationError("model_file", f"{path} is {size / 2**20:.1f} MiB, more than the limit of "
                                                 f"{limit / 2**20:.0f} MiB for this format")


def check_elements(field: str, shape: Sequence[int], limit: Optional[int] = None) -> int:
    """Number of elements of ``shape`` (exact, Python ints), refused naming ``field`` above ``limit``
    (default ``MAX_ELEMENTS``)."""
    limit = MAX_ELEMENTS if limit is None else limit
    count = math.prod(int(s) for s in shape)
    if count > limit:
        raise ModelValidationError(field, f"shape {list(shape)} holds {count:.3g} elements, more than the limit of "
                                          f"{limit:.3g} for a model")
    return count


_LOADER = yaml.CSafeLoader if getattr(yaml, "__with_libyaml__", False) else yaml.SafeLoader


def safe_load_strict(text: str, max_scalars: Optional[int] = None, max_depth: Optional[int] = None) -> Any:
    """``yaml.safe_load`` without aliases, with at most ``max_scalars`` scalar values and collections nested at
    most ``max_depth`` deep (default ``MAX_YAML_DEPTH``). The events are checked first (nothing is built), then
    the document is loaded (libyaml's loader when PyYAML has it)."""
    max_scalars = MAX_ELEMENTS if max_scalars is None else max_scalars
    max_depth = MAX_YAML_DEPTH if max_depth is None else max_depth
    scalars = depth = 0
    try:
        events = yaml.parse(text, Loader=_LOADER)
        for event in events:
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > max_depth:
                    _refuse_depth(events, depth, max_depth, event.start_mark.line + 1)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
            if isinstance(event, yaml.AliasEvent):
                raise ModelValidationError("model_file", f"YAML alias *{event.anchor} at line {event.start_mark.line + 1} "
                                                         "refused (aliases can expand to gigabytes; write the values out)")
            if isinstance(event, yaml.ScalarEvent):
                scalars += 1
                if scalars > max_scalars:
                    raise ModelValidationError("model_file", f"more than {max_scalars:.3g} values (the limit for a model)")
    except yaml.YAMLError as exc:
        raise ModelValidationError("model_file", f"not valid YAML: {exc}") from None
    return yaml.load(text, Loader=_LOADER)


def _refuse_depth(events: Any, depth: int, max_depth: int, line: int) -> None:
    """Raise for a document nested past ``max_depth``, naming its deepest nesting: the remaining ``events`` are
    only counted (streaming builds nothing and does not recurse)."""
    deepest, exact = depth, True
    try:
        for event in events:
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                deepest = max(deepest, depth)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError:
        exact = False  # malformed further on: report what was seen
    raise ModelValidationError("model_file", f"lists and mappings nested {'' if exact else 'at least '}{deepest} deep "
                                             f"(deeper than {max_depth} from line {line}); the limit for a model is "
                                             f"{max_depth} levels")


def npz_member_shapes(path: os.PathLike) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """{array name: (shape, dtype)} of an ``.npz`` read from the ``.npy`` headers only (nothing decompressed
    beyond each header)."""
    out: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            if not info.filename.endswith(".npy"):
                continue
            with zf.open(info) as f:
                version = np.lib.format.read_magic(f)
                if version == (1, 0):
                    shape, _, dtype = np.lib.format.read_array_header_1_0(f)
                else:
                    shape, _, dtype = np.lib.format.read_array_header_2_0(f)
            out[info.filename[:-4]] = (tuple(int(s) for s in shape), dtype)
    return out


def check_npz(path: os.PathLike, limit: Optional[int] = None) -> None:
    """Refuse an npz whose arrays (by their headers) hold more than ``limit`` (default ``MAX_ELEMENTS``)
    elements in all."""
    limit = MAX_ELEMENTS if limit is None else limit
    try:
        members = npz_member_shapes(path)
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise ModelValidationError("model_file", f"{path} is not a bayes_infer_ros model npz: {exc}") from None
    total = 0
    for name, (shape, dtype) in sorted(members.items()):
        total += check_elements(name, shape, limit)
        if total > limit:
            raise ModelValidationError(name, f"the arrays up to {name} hold {total:.3g} elements, more than the "
                                             f"limit of {limit:.3g} for a model")
        if name == "meta" and (dtype.kind not in "U" or len(shape) != 0):
            raise ModelValidationError("meta", f"expected a JSON string, got a {dtype} array of shape {list(shape)}")


def label_list(field: str, labels: Any) -> Optional[list[str]]:
    """One list of labels as strings (see the module docstring), or None when absent."""
    if labels is None:
        return None
    if isinstance(labels, (str, bytes)) or not isinstance(labels, (list, tuple)):
        raise ModelValidationError(field, f"expected a list of labels, got {labels!r:.80}")
    out = []
    for k, x in enumerate(labels):
        if isinstance(x, str):
            out.append(x)
        elif isinstance(x, bool):
            raise ModelValidationError(f"{field}[{k}]", f"label {x!r} is a boolean (YAML reads on/off/yes/no/true/"
                                                         "false as booleans): quote it, e.g. \"on\"")
        elif isinstance(x, (int, np.integer)):
            out.append(str(int(x)))
        else:
            raise ModelValidationError(f"{field}[{k}]", f"label {x!r:.40} is a {type(x).__name__}; expected a string "
                                                         "(or an integer, written as its decimal text)")
    return out


def label_lists(field: str, rows: Any) -> Optional[list[list[str]]]:
    """Per-factor / per-modality label lists as strings, or None when absent."""
    if rows is None:
        return None
    if not isinstance(rows, (list, tuple)):
        raise ModelValidationError(field, f"expected one list of labels per entry, got {rows!r:.80}")
    return [label_list(f"{field}[{i}]", row) for i, row in enumerate(rows)]
