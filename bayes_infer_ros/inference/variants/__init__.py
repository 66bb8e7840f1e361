"""The paper's nine merged variants and the fused family. Each family module exposes ``register()``."""
from __future__ import annotations

import importlib

FAMILIES = ("hybrid", "end_to_end", "fused")


def register_all() -> None:
    for name in FAMILIES:
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:  # a family not written yet (development only)
            if exc.name != f"{__name__}.{name}":
                raise
            continue
        module.register()
