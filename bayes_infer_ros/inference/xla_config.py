"""XLA flags the engine is measured with, applied before JAX starts its backend.

XLA reads ``XLA_FLAGS`` once, when the first computation creates the backend; a flag set later is silently
ignored. ``apply_defaults()`` runs when ``bayes_infer_ros.inference`` is imported (the library, the
``bayes-infer`` CLI and the node all import it before their first computation) and ADDS each default flag
that ``XLA_FLAGS`` does not already name, so a user's own setting always wins:

* ``xla_cpu_small_while_loop_byte_threshold`` (through ``--xla_backend_extra_options``): XLA:CPU compiles a
  while loop whose state is below this many bytes into ONE kernel instead of running its body step by step
  (with a thread-pool hand-off per step). Measured on the default model (benchmarks/README.md): pymdp and the
  baseline engine's VMP/MMP 15-35% faster, FPI unchanged (its loop is already inline); loop unrolling went the
  other way on CPU (baseline VMP 208 -> 324 us), so no unroll flag is set.

``BAYES_INFER_XLA_DEFAULTS=0`` in the environment turns this off (``XLA_FLAGS`` is then left exactly as it is).
"""
from __future__ import annotations

import os
import sys

SMALL_WHILE_LOOP_BYTES = 65536
DEFAULT_BACKEND_OPTIONS = {"xla_cpu_small_while_loop_byte_threshold": str(SMALL_WHILE_LOOP_BYTES)}
OPT_OUT = "BAYES_INFER_XLA_DEFAULTS"


def merged_flags(current: str, options: dict[str, str] = DEFAULT_BACKEND_OPTIONS) -> str:
    """``current`` XLA_FLAGS plus every backend option it does not name already (a user's value wins)."""
    missing = {k: v for k, v in options.items() if k not in current}
    if not missing:
        return current
    extra = ",".join(f"{k}={v}" for k, v in missing.items())
    parts = current.split()
    for i, part in enumerate(parts):
        if part.startswith("--xla_backend_extra_options="):
            parts[i] = part + "," + extra
            return " ".join(parts)
    return " ".join(parts + [f"--xla_backend_extra_options={extra}"])


def backend_started() -> bool:
    """True when JAX has already created a backend (flags set now would be ignored)."""
    jax = sys.modules.get("jax")
    if jax is None:
        return False
    try:
        from jax._src import xla_bridge

        return bool(getattr(xla_bridge, "_backends", {}))
    except Exception:  # noqa: BLE001 - private module moved: assume the usual import order (not started)
        return False


def apply_defaults() -> bool:
    """Add the defaults to ``XLA_FLAGS`` unless opted out or too late; returns True when they are in effect."""
    if os.environ.get(OPT_OUT, "1") == "0":
        return False
    current = os.environ.get("XLA_FLAGS", "")
    merged = merged_flags(current)
    if merged == current:
        return True
    if backend_started():
        return False
    os.environ["XLA_FLAGS"] = merged
    return True
