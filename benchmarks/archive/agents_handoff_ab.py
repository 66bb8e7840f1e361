"""fused_numba's batched tick on two cores: the hand-off of a block of agents to a second thread, three ways.

    PYTHONPATH=. python benchmarks/archive/agents_handoff_ab.py > benchmarks/archive/agents_handoff_ab_cpu.txt

The default model, FPI, float32, one-hot observations, b = 100 and 1000 agents of one model, two blocks:

- ``pool``: the serial kernel on each block, the second from a Python worker thread (``host.over_agent_blocks``);
- ``prange``: ``tick.fpi_tick_agents_parallel`` (numba's ``prange`` on its threading layer, OpenMP here), with
  OpenMP's defaults, with ``GOMP_SPINCOUNT=10000``, and with ``OMP_WAIT_POLICY=passive`` (no spinning);

each against the serial kernel on one thread (``fpi_tick_batched``) in the same process, round-robin, the order
rotating each round; per candidate the median time per call over the rounds (a round: ~3000 agent-ticks back to
back). Each pair runs in a process of its own (OpenMP's workers spin after a parallel region and would take the
second core from a candidate timed after them), first on the otherwise idle machine, then beside two busy loops (a
robot whose other processes keep both cores busy). The outputs are checked bit for bit against the serial kernel's
first.
"""
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
CASES = [("pool", {}), ("prange", {}), ("prange", {"GOMP_SPINCOUNT": "10000"}),
         ("prange", {"OMP_WAIT_POLICY": "passive"})]
SECONDS = 8.0


def child(candidate: str) -> None:
    sys.path.insert(0, str(ROOT))
    from bayes_infer_ros.inference import engine_for_model
    from bayes_infer_ros.inference.native import host
    from bayes_infer_ros.inference.native.engine import kernels
    from bayes_infer_ros.model.io import load_model

    model = load_model(ROOT / "config" / "agent.yaml")
    e = engine_for_model(model, "fpi", variant="fused_numba", num_iter=16)
    m, k = e.model, kernels()
    serial = k.fpi_tick_batched_entry(np.float32)
    parallel = k.fpi_tick_agents_parallel_entry(np.float32)
    rng = np.random.default_rng(0)
    for b in (100, 1000):
        obs = np.zeros((b, e.layout.obs_size), np.float32)
        obs[:, list(e.layout.obs_offsets[:-1])] = 1
        prior = np.ascontiguousarray(np.concatenate([rng.dirichlet(np.ones(n), b) for n in model.num_states], 1),
                                     np.float32)
        act = np.zeros((b, len(model.num_states)), np.int32)
        outs = {n: np.empty((b, 2, e.layout.state_size), np.float32) for n in ("serial", candidate)}

        def run_serial() -> None:
            serial(m.ints, m.log_A, m.B, obs, prior, 16, m.minval, act, outs["serial"])

        def run_pool() -> None:
            o = outs["pool"]
            host.over_agent_blocks(b, 2, lambda lo, hi: serial(m.ints, m.log_A, m.B, obs[lo:hi], prior[lo:hi], 16,
                                                               m.minval, act[lo:hi], o[lo:hi]))

        def run_prange() -> None:
            with host.numba_threads(2):
                parallel(m.ints, m.log_A, m.B, obs, prior, 16, m.minval, act, outs["prange"], 2)

        fns = {"serial": run_serial, candidate: run_pool if candidate == "pool" else run_prange}
        for f in fns.values():
            f()
        assert np.array_equal(outs["serial"], outs[candidate])
        names, times, reps, r = list(fns), {n: [] for n in fns}, max(1, 3000 // b), 0
        t_end = time.time() + SECONDS
        while time.time() < t_end:
            for n in names[r % 2:] + names[:r % 2]:
                t0 = time.perf_counter()
                for _ in range(reps):
                    fns[n]()
                times[n].append((time.perf_counter() - t0) / reps)
            r += 1
        med = {n: float(np.median(v)) for n, v in times.items()}
        spread = {n: np.percentile(v, [10, 90]) * 1e6 for n, v in times.items()}
        print(f"  b={b:<5d} rounds={r:<4d} serial {med['serial'] * 1e6:7.1f} us | {candidate} "
              f"{med[candidate] * 1e6:7.1f} us (p10..p90 {spread[candidate][0]:.0f}..{spread[candidate][1]:.0f}) | "
              f"{med['serial'] / med[candidate]:.2f}x one thread | load {os.getloadavg()[0]:.2f}", flush=True)


def main() -> None:
    import numba
    import platform

    print(f"# {platform.machine()}, {len(os.sched_getaffinity(0))} CPUs, numba {numba.__version__}, "
          f"python {platform.python_version()}; load average at start {os.getloadavg()[0]:.2f}", flush=True)
    for label, busy in (("otherwise idle", 0), ("beside two busy loops", 2)):
        loops = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(busy)]
        try:
            print(f"## {label}", flush=True)
            for candidate, env in CASES:
                print(f"- {candidate} {' '.join(f'{k}={v}' for k, v in env.items()) or '(defaults)'}", flush=True)
                subprocess.run([sys.executable, __file__, "--child", candidate], env={**os.environ, **env},
                               check=True)
        finally:
            for p in loops:
                p.kill()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2])
    else:
        main()
