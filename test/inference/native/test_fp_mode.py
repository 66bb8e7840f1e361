"""fused_numba's kernels flush subnormals to zero through this machine's control register: x86-64 MXCSR
(FTZ | DAZ) or AArch64 FPCR (FZ, bit 24). On x86 CI this runs the MXCSR path; `make test-aarch64` runs the same
test under qemu-user on AArch64, where it checks the FPCR path (test/inference/test_fused_variants.py compares the
flushed results with pymdp's)."""
import platform

import numpy as np
import pytest

MACHINE = platform.machine().lower()
FLUSH_BITS = {"x86_64": ("MXCSR", 0x8040), "amd64": ("MXCSR", 0x8040),
              "aarch64": ("FPCR", 1 << 24), "arm64": ("FPCR", 1 << 24)}


@pytest.mark.numba
@pytest.mark.skipif(MACHINE not in FLUSH_BITS, reason=f"no flush-to-zero path on {MACHINE}")
def test_the_kernels_flush_subnormals_through_this_machines_control_register():
    import numba

    from bayes_infer_ros.inference.native import fp_mode as nk

    register, bits = FLUSH_BITS[MACHINE]
    assert (nk._X86, nk._ARM64) == (register == "MXCSR", register == "FPCR")
    assert {"MXCSR": nk._MXCSR_FTZ_DAZ, "FPCR": nk._FPCR_FZ}[register] == bits

    @numba.njit(cache=False)
    def probe(x, y):
        before = nk.flush_subnormals()
        inside = nk.flush_subnormals()  # the word as the kernels run: returned by a second flush
        product = x * y                 # 1e-310 is subnormal in float64: flushed to 0
        nk.restore_fp_mode(inside)
        nk.restore_fp_mode(before)
        return before, inside, product

    x, y = np.float64(1e-300), np.float64(1e-10)
    before, inside, product = probe(x, y)
    print(f"{MACHINE}: {register} before {before:#x}, in the kernels {inside:#x}; 1e-300 * 1e-10 there: {product}")
    assert inside & bits == bits and before & bits == 0, (hex(before), hex(inside))
    assert product == 0.0
    assert x * y > 0.0  # the calling thread's mode is back: numpy produces the subnormal
