"""How XLA:CPU runs a compiled program: inline in the caller's thread, or step by step on its thread pool.

XLA:CPU turns a program into a sequence of "thunks" (kernels, library calls, loops). A ``ThunkExecutor``
runs a sequence inline (sequentially, in the calling thread) when the thunks form one dependency chain,
when every buffer they touch is at most 512 bytes, or when there are at most 8 of them; otherwise it
dispatches ready thunks to a thread pool, which costs microseconds per step and makes timings bimodal.
Each while loop body has its own executor with the same rule. The thresholds are compiled into XLA; the
executor logs its decision (``VLOG(2)`` in ``thunk_executor.cc``), which is what this module reads.

    os.environ.update(LOG_ENV)              # before jax is imported
    import jax
    out, modes = capture_modes(lambda: jax.block_until_ready(fn(*args)))   # the first (compiling) call
    modes[-1].label                          # e.g. "inline", "pool(13 thunks)", "inline; loop body pool(26)"
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, Callable, Optional

LOG_ENV = {"TF_CPP_MIN_LOG_LEVEL": "0", "TF_CPP_VMODULE": "thunk_executor=2,cpu_executable=2"}

_CREATE = re.compile(r"Create CpuExecutable from a thunk sequence; module=(\S+),")
_EXECUTOR = re.compile(r"Constructed ThunkExecutor with (\d+) (?:thunks|nodes).*is_sequential=(\w+), small_buffers=(\w+)")


@dataclass(frozen=True)
class Executor:
    """One thunk sequence: how many steps, and whether XLA runs it inline."""

    thunks: int
    sequential: bool
    small_buffers: bool


@dataclass(frozen=True)
class ProgramMode:
    """A compiled module: its top-level executor and the nested ones (while bodies, branches)."""

    module: str
    top: Executor
    nested: tuple[Executor, ...]

    @property
    def inline(self) -> bool:
        return self.top.sequential and all(e.sequential for e in self.nested)

    @property
    def label(self) -> str:
        top = "inline" if self.top.sequential else f"pool({self.top.thunks} thunks)"
        pooled = [e.thunks for e in self.nested if not e.sequential]
        if pooled:
            top += "; loop body pool(" + ",".join(str(n) for n in pooled) + ")"
        return top


def logging_enabled() -> bool:
    """True when this process was started with LOG_ENV (XLA reads it once, when it initialises)."""
    return "thunk_executor=2" in os.environ.get("TF_CPP_VMODULE", "") and os.environ.get("TF_CPP_MIN_LOG_LEVEL") == "0"


def parse_log(text: str) -> list[ProgramMode]:
    """Every compiled module in an XLA log, in order. Nested executors are built before their module's
    "Create CpuExecutable" line, the top-level one right after it."""
    modes: list[ProgramMode] = []
    pending: list[Executor] = []
    module: Optional[str] = None
    for line in text.splitlines():
        m = _CREATE.search(line)
        if m:
            module = m.group(1)
            continue
        e = _EXECUTOR.search(line)
        if not e:
            continue
        ex = Executor(int(e.group(1)), e.group(2) == "true", e.group(3) == "true")
        if module is not None:
            modes.append(ProgramMode(module, ex, tuple(pending)))
            pending, module = [], None
        else:
            pending.append(ex)
    return modes


def capture_modes(fn: Callable[[], Any]) -> tuple[Any, list[ProgramMode]]:
    """Run ``fn`` (which compiles something) with stderr captured at the file-descriptor level; return its
    result and the modes of the modules it compiled (empty when logging is not enabled)."""
    if not logging_enabled():
        return fn(), []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            out = fn()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        text = tmp.read().decode(errors="replace")
    return out, parse_log(text)


def program_label(modes: list[ProgramMode], name_contains: str = "") -> str:
    """The label of the last compiled module whose name contains ``name_contains`` ("" when unknown)."""
    for mode in reversed(modes):
        if name_contains in mode.module:
            return mode.label
    return ""
