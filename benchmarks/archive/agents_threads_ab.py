"""fused_numba's batched tick on every core: numba ``prange`` over agent blocks (numba's threading layer) against
Python threads over agent blocks, each calling the serial kernel (which releases the GIL), and one thread.

    PYTHONPATH=. python benchmarks/archive/agents_threads_ab.py

The default model, FPI, float32, one-hot observations; b = 100, 1000, 10000 agents of one model. Candidates
interleaved round-robin for 20 s per b (their order rotating by one each round); per candidate the median over
rounds of the time per call (a round: ~2000 agent-ticks back to back), as agent-ticks per second and as a ratio to
the serial kernel. The outputs of all three are checked bit for bit first. Two blocks (this VM's two CPUs).

First a control: a trivially parallel numba loop on one thread against two threads, three times: what the machine
gives a second thread of this process at the time (on a loaded machine with the kernel's autogroup scheduling, a
process's threads share its session's slice, and the control shows about 1x).
"""
import os
import platform
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numba
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bayes_infer_ros.inference import engine_for_model  # noqa: E402
from bayes_infer_ros.inference.native.engine import kernels  # noqa: E402
from bayes_infer_ros.inference.native.fp_mode import flush_subnormals, restore_fp_mode  # noqa: E402
from bayes_infer_ros.inference.native.fpi import _fpi_into  # noqa: E402
from bayes_infer_ros.inference.native.tick import _index, _tick_scratch  # noqa: E402
from bayes_infer_ros.inference.native.transitions import _predict_into  # noqa: E402
from bayes_infer_ros.model.io import load_model  # noqa: E402


@numba.njit(nogil=True, parallel=True)
def par_batched(ints, log_A, B, obs, prior, num_iter, minval, action, out, blocks):
    a_off, ll_off, deps, dims, ks, ns, o_off, s_off, b_off, bdeps, bdims, bks, ncontrols = _index(ints)
    b = obs.shape[0]
    shared = log_A.shape[0] == 1
    for blk in numba.prange(blocks):
        lo = blk * b // blocks
        hi = (blk + 1) * b // blocks
        nobs, idx, idx_b, ll, dbuf, wv, c, x, Q, Qp, tmp = _tick_scratch(ll_off, deps, dims, ks, ns, o_off, bdeps,
                                                                          prior)
        mode = flush_subnormals()
        for i in range(lo, hi):
            ab = 0 if shared else i
            _fpi_into(log_A[ab:ab + 1], a_off, ll_off, deps, dims, ks, ns, o_off, s_off, obs[i:i + 1],
                      prior[i:i + 1], num_iter, minval, out[i, :1], nobs, idx, ll, dbuf, wv, c, x, Q)
            _predict_into(B, ab, b_off, bdeps, bdims, bks, ncontrols, ns, s_off, out[i, 0], action[i], out[i, 1], Qp,
                          tmp, idx_b)
        restore_fp_mode(mode)
    return -1


@numba.njit(nogil=True)
def burn(n):
    """n steps of a dependent float loop (the control's work)."""
    s = 0.0
    for i in range(n):
        s += (i % 7) * 0.5
    return s


def control(n: int = 200_000_000) -> None:
    burn(10)
    for _ in range(3):
        t0 = time.perf_counter()
        burn(n)
        one = time.perf_counter() - t0
        pool = [threading.Thread(target=burn, args=(n // 2,)) for _ in range(2)]
        t0 = time.perf_counter()
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        two = time.perf_counter() - t0
        print(f"control: one thread {one:.3f} s, two threads {two:.3f} s ({one / two:.2f}x) | load "
              f"{os.getloadavg()[0]:.1f}", flush=True)


def main():
    model = load_model(ROOT / "config" / "agent.yaml")
    e = engine_for_model(model, "fpi", variant="fused_numba", num_iter=16)
    m = e.model
    rng = np.random.default_rng(0)
    pool = ThreadPoolExecutor(max_workers=1)
    serial = kernels().fpi_tick_batched_entry(np.float32)
    ncpu = len(os.sched_getaffinity(0))
    print(f"# {platform.machine()}, {ncpu} CPUs, numba {numba.__version__}; load average {os.getloadavg()}",
          flush=True)
    control()
    for b in (100, 1000, 10000):
        obs = np.zeros((b, e.layout.obs_size), np.float32)
        for off in e.layout.obs_offsets[:-1]:
            obs[:, off] = 1
        prior = np.ascontiguousarray(np.concatenate([rng.dirichlet(np.ones(n), b) for n in model.num_states], 1), np.float32)
        act = np.zeros((b, 3), np.int32)
        outs = {k: np.empty((b, 2, e.layout.state_size), np.float32) for k in ("serial", "prange", "threads")}

        def f_serial():
            serial(m.ints, m.log_A, m.B, obs, prior, 16, m.minval, act, outs["serial"])

        def f_prange():
            numba.set_num_threads(ncpu)
            par_batched(m.ints, m.log_A, m.B, obs, prior, 16, m.minval, act, outs["prange"], ncpu)

        def f_threads():
            o = outs["threads"]
            h = b // 2
            fut = pool.submit(serial, m.ints, m.log_A, m.B, obs[h:], prior[h:], 16, m.minval, act[h:], o[h:])
            serial(m.ints, m.log_A, m.B, obs[:h], prior[:h], 16, m.minval, act[:h], o[:h])
            fut.result()

        fns = {"serial": f_serial, "prange": f_prange, "threads": f_threads}
        for f in fns.values():
            f()
        assert np.array_equal(outs["serial"], outs["prange"]) and np.array_equal(outs["serial"], outs["threads"])
        rounds = {"serial": [], "prange": [], "threads": []}
        names = list(fns)
        reps = max(1, 2000 // b)
        t_end = time.time() + 20
        r = 0
        while time.time() < t_end:
            k = r % 3
            for n in names[k:] + names[:k]:
                t0 = time.perf_counter()
                for _ in range(reps):
                    fns[n]()
                rounds[n].append((time.perf_counter() - t0) / reps)
            r += 1
        med = {n: np.median(v) for n, v in rounds.items()}
        print(f"b={b} rounds={r} " + " ".join(f"{n} {b / med[n]:.3g}/s" for n in names)
              + f" | prange/serial speedup {med['serial'] / med['prange']:.2f} threads/serial {med['serial'] / med['threads']:.2f}"
              + f" | load {os.getloadavg()[0]:.1f}", flush=True)
    print("# numba's threading layer:", numba.threading_layer())


if __name__ == "__main__":
    main()
