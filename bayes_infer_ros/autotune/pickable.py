"""Which variants ``variant: auto`` can run, per install and device, read from the shipped autotuner models.

    auto_variants("vmp", numba=True)                  # ("fused_numba", "baseline")
    auto_variants("vmp", numba=False)                 # the portable model's classes, then "baseline"
    auto_variants("vmp", numba=True, platform="gpu")  # the GPU's ranking (the CPU's portable model's classes)

A ranking model can only return the classes it was trained to predict (``constant`` for a model with one winning
class, ``classes`` otherwise); ``baseline`` is the fallback, and the verify step times it beside the top candidates.
With the verify step, a device's native engines that its model was not trained on are candidates too
(``decision.candidates``). Any other variant runs only when named (``variant: NAME``). The memory budget and the size
guard can drop candidates for a given model; this is the most ``auto`` can pick, not what it picks for one model.
"""
from __future__ import annotations

import json
import os
from typing import Optional

from ..inference.registry import NATIVE_VARIANTS, VARIANTS
from .select import FALLBACK, model_folder, model_tags

#: The installs ``auto_variants`` describes: (label, numba installed, platform).
INSTALLS: tuple[tuple[str, bool, str], ...] = (
    ("CPU, numba installed (the `[native]` extra)", True, "cpu"),
    ("CPU, without numba", False, "cpu"),
    ("GPU (no model of its own shipped)", True, "gpu"),
)


def shipped_model(algorithm: str, platform: str, numba: bool,
                  model_dir: Optional[os.PathLike] = None) -> tuple[Optional[str], tuple[str, ...]]:
    """(the model's tag, the classes it can return) for ``algorithm``; (None, ()) when no model file has it."""
    d = model_folder(model_dir)
    for tag in model_tags(platform, numba):
        meta = d / f"{tag}_meta.json"
        if not meta.is_file():
            continue
        entry = json.loads(meta.read_text()).get("algorithms", {}).get(algorithm)
        if entry is None:
            continue
        classes = [entry["constant"]] if "constant" in entry else list(entry.get("classes", ()))
        return tag, tuple(v for v in classes if v in VARIANTS)
    return None, ()


def auto_variants(algorithm: str, numba: bool, platform: str = "cpu",
                  model_dir: Optional[os.PathLike] = None) -> tuple[str, ...]:
    """Every variant ``variant: auto`` can run on ``platform`` for ``algorithm``: the ranking model's classes that can
    run there, the platform's native engines the model does not know (with the verify step), then ``baseline``."""
    _, classes = shipped_model(algorithm, platform, numba, model_dir)
    natives = [v for v, cls in NATIVE_VARIANTS.items()
               if cls.device == platform and v not in classes and (numba or platform != "cpu")]
    runs_here = [v for v in classes if v not in NATIVE_VARIANTS or NATIVE_VARIANTS[v].device == platform]
    runs_here = [v for v in runs_here if numba or v not in NATIVE_VARIANTS or platform != "cpu"]
    return tuple(dict.fromkeys(natives + runs_here + [FALLBACK]))


def auto_variants_table(model_dir: Optional[os.PathLike] = None, algorithms: tuple[str, ...] = ("fpi", "vmp", "mmp"),
                        ) -> str:
    """A markdown table: per install and algorithm, the model used and what ``auto`` can run."""
    lines = ["| install | algorithm | model | `variant: auto` can run |", "|---|---|---|---|"]
    for label, numba, platform in INSTALLS:
        for alg in algorithms:
            tag, _ = shipped_model(alg, platform, numba, model_dir)
            names = ", ".join(f"`{v}`" for v in auto_variants(alg, numba, platform, model_dir))
            where = f"`{tag}`" if tag else "none (rule: `baseline`)"
            lines.append(f"| {label} | {alg} | {where} | {names} |")
    return "\n".join(lines) + "\n"
