"""The floating-point mode fused_numba's kernels run in: subnormal floats flushed to zero (numba intrinsics).

``flush_subnormals`` sets x86-64 MXCSR FTZ | DAZ or AArch64 FPCR.FZ on the calling thread and returns the previous
control word; ``restore_fp_mode`` puts it back. Every entry point calls the pair around its kernel: XLA:CPU, and so
pymdp, runs its programs in this mode (why around the kernel and not inside it: TUNING.md beside this file).
On other architectures both are no-ops.
"""
import platform

import numba
from llvmlite import ir
from numba.core import cgutils
from numba.extending import intrinsic

_MACHINE = platform.machine().lower()
_X86 = _MACHINE in ("x86_64", "amd64", "i686", "i386")
_ARM64 = _MACHINE in ("aarch64", "arm64")
_MXCSR_FTZ_DAZ = 0x8040  # x86 MXCSR: flush-to-zero (bit 15), denormals-are-zero (bit 6)
_FPCR_FZ = 1 << 24  # AArch64 FPCR: flush-to-zero


def _mxcsr_slot(builder):
    slot = cgutils.alloca_once(builder, ir.IntType(32))
    return slot, builder.bitcast(slot, ir.IntType(8).as_pointer())


def _mxcsr_op(builder, name, ptr):
    fnty = ir.FunctionType(ir.VoidType(), [ptr.type])
    builder.call(cgutils.get_or_insert_function(builder.module, fnty, name), [ptr])


def _fpcr_read(builder):
    fnty = ir.FunctionType(ir.IntType(64), [])
    return builder.call(cgutils.get_or_insert_function(builder.module, fnty, "llvm.aarch64.get.fpcr"), [])


def _fpcr_write(builder, word):
    fnty = ir.FunctionType(ir.VoidType(), [ir.IntType(64)])
    builder.call(cgutils.get_or_insert_function(builder.module, fnty, "llvm.aarch64.set.fpcr"), [word])


@intrinsic
def flush_subnormals(typingctx):
    """Flush subnormal results (and, on x86, operands) to zero on this thread from here on; returns the previous
    floating-point control word for ``restore_fp_mode``. A no-op returning 0 on other architectures."""
    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        if _X86:
            slot, ptr = _mxcsr_slot(builder)
            _mxcsr_op(builder, "llvm.x86.sse.stmxcsr", ptr)
            old = builder.load(slot)
            builder.store(builder.or_(old, ir.Constant(old.type, _MXCSR_FTZ_DAZ)), slot)
            _mxcsr_op(builder, "llvm.x86.sse.ldmxcsr", ptr)
            return builder.zext(old, i64)
        if _ARM64:
            old = _fpcr_read(builder)
            _fpcr_write(builder, builder.or_(old, ir.Constant(i64, _FPCR_FZ)))
            return old
        return ir.Constant(i64, 0)
    return numba.types.int64(), codegen


@intrinsic
def restore_fp_mode(typingctx, word):
    """Put back the control word that ``flush_subnormals`` returned."""
    def codegen(context, builder, signature, args):
        if _X86:
            slot, ptr = _mxcsr_slot(builder)
            builder.store(builder.trunc(args[0], ir.IntType(32)), slot)
            _mxcsr_op(builder, "llvm.x86.sse.ldmxcsr", ptr)
        elif _ARM64:
            _fpcr_write(builder, args[0])
        return context.get_dummy_value()
    return numba.types.void(numba.types.int64), codegen
