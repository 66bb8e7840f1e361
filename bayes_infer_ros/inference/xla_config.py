"""XLA settings of the engines: full-precision dots, per-program compile options, and optional XLA flags applied
before JAX starts its backend (opt in: BAYES_INFER_XLA_DEFAULTS=1).

**Full-precision dots** (``full_precision``, around every engine program): traced under
``jax.default_matmul_precision("highest")``, so a GPU does not round float32 dot operands to TF32 (see
``MATMUL_PRECISION``). On a CPU the results and times are unchanged (benchmarks/archive/precision_ab_cpu.txt).

**Compile options** (``compile_options(device)``, passed to every engine program's ``jax.jit``): on a CPU device,
``xla_cpu_use_fusion_emitters=False``, XLA:CPU's elemental loop emitters instead of its MLIR fusion emitters. The
HLO is the same; LLVM's code generation, which is most of a large model's compile (2.8 s of 2.9 s for
fused_pairwise's VMP at F = M = 125), takes about half as long, the programs run within a few percent of the
same time either way, and give the same bits (benchmarks/README.md, "Compile times"). A jaxlib that does not know
the option (JAX 0.11 dropped it) gets none: ``compile_options`` compiles a one-element program with it once per
process and falls back on any error. ``BAYES_INFER_XLA_FUSION_EMITTERS=1`` keeps XLA's default.

XLA reads ``XLA_FLAGS`` once, when the first computation creates the backend; a flag set later is silently
ignored. ``apply_defaults()`` runs when ``bayes_infer_ros.inference`` is imported (the library, the
``bayes-infer`` CLI and the node all import it before their first computation). With
``BAYES_INFER_XLA_DEFAULTS=1`` in the environment it ADDS each flag below that ``XLA_FLAGS`` does not already
name (a user's own setting always wins); otherwise it changes nothing.

* ``xla_cpu_small_while_loop_byte_threshold`` (through ``--xla_backend_extra_options``): XLA:CPU compiles a
  while loop whose state is below this many bytes into ONE kernel instead of running its body step by step
  (with a thread-pool hand-off per step). It speeds up pymdp's and the baseline engine's VMP/MMP loops and leaves
  FPI (already inline) alone; its measurement is in benchmarks/README.md. No unroll flag is set: unrolling was
  slower on CPU.

It is opt-in because a test-suite run with it on once died in an XLA:CPU compile (``backend_compile_and_load``,
not reproduced since, never seen without the flag): an unexplained crash in a robot's process costs more than the
speed-up of the looped programs, and the fused and numba variants do not need it.
"""
from __future__ import annotations

import functools
import os
import sys
from typing import Any, Optional

import jax  # importing jax starts no backend: XLA_FLAGS set below still apply
import numpy as np

SMALL_WHILE_LOOP_BYTES = 65536
DEFAULT_BACKEND_OPTIONS = {"xla_cpu_small_while_loop_byte_threshold": str(SMALL_WHILE_LOOP_BYTES)}
OPT_IN = "BAYES_INFER_XLA_DEFAULTS"
CPU_COMPILE_OPTIONS = {"xla_cpu_use_fusion_emitters": False}
FUSION_EMITTERS = "BAYES_INFER_XLA_FUSION_EMITTERS"  # "1": XLA's default emitters on the CPU too


#: Every float32 dot of an engine program at full precision (``jax.default_matmul_precision``, fixed at trace time):
#: a GPU's default (Ampere and later, a Jetson Orin's included) rounds a float32 dot's operands to TF32, 10 bits of
#: mantissa, and on the H200 that moved the merged variants' beliefs by up to 0.96 from pymdp's in a VMP window
#: (benchmarks/sweep_scale_nvidia_h200.csv, ``max_abs_diff_vs_pymdp``). A CPU computes float32 dots exactly either
#: way.
MATMUL_PRECISION = "highest"


def full_precision(fn: Any) -> Any:
    """``fn`` traced under ``jax.default_matmul_precision(MATMUL_PRECISION)``: its dots carry HIGHEST precision."""
    @functools.wraps(fn)
    def traced(*args: Any, **kwargs: Any) -> Any:
        with jax.default_matmul_precision(MATMUL_PRECISION):
            return fn(*args, **kwargs)
    return traced


@functools.lru_cache(maxsize=None)
def _accepted(platform: str, options: tuple[tuple[str, Any], ...]) -> bool:
    """True when this jaxlib compiles a program for ``platform`` with ``options`` (one tiny compile, cached)."""
    try:
        x = jax.device_put(np.zeros(1, np.float32), jax.devices(platform)[0])
        jax.jit(lambda v: v + 1.0, compiler_options=dict(options)).lower(x).compile()
    except Exception:  # noqa: BLE001 - an unknown option (XlaRuntimeError, ValueError, ...): compile without it
        return False
    return True


def compile_options(device: Any) -> Optional[dict[str, Any]]:
    """The compile options of an engine program on ``device`` (a ``jax.Device``): ``CPU_COMPILE_OPTIONS`` on a CPU
    whose jaxlib accepts them, else None (XLA's defaults)."""
    if getattr(device, "platform", None) != "cpu" or os.environ.get(FUSION_EMITTERS, "0") == "1":
        return None
    items = tuple(sorted(CPU_COMPILE_OPTIONS.items()))
    return dict(CPU_COMPILE_OPTIONS) if _accepted("cpu", items) else None


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
    # jax's backend registry, loaded with jax (a private module: absent if it moves, then "not started")
    bridge = sys.modules.get("jax._src.xla_bridge")
    return bool(getattr(bridge, "_backends", {})) if bridge is not None else False


def apply_defaults() -> bool:
    """Add the flags to ``XLA_FLAGS`` when opted in (and not too late); returns True when they are in effect."""
    if os.environ.get(OPT_IN, "0") != "1":
        return False
    current = os.environ.get("XLA_FLAGS", "")
    merged = merged_flags(current)
    if merged == current:
        return True
    if backend_started():
        return False
    os.environ["XLA_FLAGS"] = merged
    return True
