"""fused_cuda's device helpers that other modules' kernels call read no ``cuda.*``: read statically (``ast``, numba
not needed). numba's CUDA simulator switches a device function's module-level ``cuda`` to the launch's simulated
module for each call and back when the call returns, for all of a block's threads at once, so such a helper could
read the real ``numba.cuda`` ("no attribute 'threadIdx'", issue 45 F12); ``test_fused_cuda.py`` runs the kernels
with the threads interleaving. A kernel reads ``cuda.*`` itself and passes what a helper needs."""
from __future__ import annotations

import ast
from pathlib import Path

NATIVE = Path(__file__).resolve().parents[3] / "bayes_infer_ros" / "inference" / "native"
KERNEL_MODULES = ("cuda_kernels", "cuda_large", "cuda_window")


def _is_device_function(fn: ast.FunctionDef) -> bool:
    return any(isinstance(d, ast.Call) and any(k.arg == "device" for k in d.keywords) for d in fn.decorator_list)


def _cuda_reads(fn: ast.FunctionDef) -> set[str]:
    """``cuda.<name>`` read in ``fn``'s body (its decorators left out)."""
    return {f"cuda.{node.attr}" for stmt in fn.body for node in ast.walk(stmt)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "cuda"}


def _imported_from_other_modules() -> set[tuple[str, str]]:
    """(module, helper) for every name a kernel module imports from another one."""
    out = set()
    for name in KERNEL_MODULES:
        for node in ast.walk(ast.parse((NATIVE / f"{name}.py").read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module in KERNEL_MODULES:
                out |= {(node.module, alias.name) for alias in node.names}
    return out


def test_helpers_called_from_other_modules_read_no_cuda_attributes():
    shared = _imported_from_other_modules()
    assert ("cuda_kernels", "agent_block") in shared  # the scan sees the helpers cuda_large and cuda_window use
    reads = {}
    for name in KERNEL_MODULES:
        for top in ast.parse((NATIVE / f"{name}.py").read_text()).body:
            if isinstance(top, ast.FunctionDef) and (name, top.name) in shared:  # a helper, or a factory of helpers
                reads[(name, top.name)] = set().union(*[_cuda_reads(fn) for fn in ast.walk(top)
                                                        if isinstance(fn, ast.FunctionDef) and _is_device_function(fn)])
    assert reads and not any(reads.values()), {k: v for k, v in reads.items() if v}
