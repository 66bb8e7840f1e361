"""The floor of one GPU call on this machine: a trivial jitted JAX call, a trivial numba.cuda kernel launch, the
same with the tick's two small copies (host to device, device to host), and a trivial CuPy op, each with its
synchronisation; back-to-back calls after a warm-up, median and spread in microseconds.

    JAX_PLATFORMS=cuda python benchmarks/launch_floor.py | tee benchmarks/launch_floor_<device>.txt

A one-launch tick cannot run faster than "numba launch+H2D+D2H+sync" (fused_cuda's path) or "jax ... + to host"
(a JAX variant's) on the same machine.
"""
import argparse
import statistics
import time

import numpy as np


def t(fn, n=300):
    for _ in range(20):
        fn()
    xs = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        xs.append(time.perf_counter() - t0)
    xs.sort()
    return f"median {statistics.median(xs) * 1e6:8.1f} us p10 {xs[n // 10] * 1e6:8.1f} p90 {xs[9 * n // 10] * 1e6:8.1f}"


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n")[0]).parse_args()
    import jax  # optional: a CUDA jaxlib, numba's CUDA target and CuPy (a GPU session)
    import jax.numpy as jnp
    from numba import cuda

    x = jnp.ones(8)
    f = jax.jit(lambda v: v * 2 + 1)
    print("jax trivial jit + block      ", t(lambda: f(x).block_until_ready()))
    print("jax trivial jit + to host    ", t(lambda: np.asarray(f(x))))
    h = np.ones(8, np.float32)
    print("jax device_put + jit + host  ", t(lambda: np.asarray(f(jax.device_put(h)))))

    @cuda.jit
    def k(a):
        i = cuda.grid(1)
        if i < a.size:
            a[i] += 1
    d = cuda.to_device(h)
    s = cuda.stream()
    print("numba empty-ish kernel + sync", t(lambda: (k[1, 32, s](d), s.synchronize())))
    print("numba launch+H2D+D2H+sync    ", t(lambda: (d.copy_to_device(h, stream=s), k[1, 32, s](d),
                                                      d.copy_to_host(stream=s), s.synchronize())))
    import cupy  # optional: CuPy
    a = cupy.ones(8)
    print("cupy tiny op + sync          ", t(lambda: (a.__iadd__(1), cupy.cuda.Device().synchronize())))


if __name__ == "__main__":
    main()
