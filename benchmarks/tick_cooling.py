"""What a tick costs after the process waited, against the same calls back to back: the node's cold start per tick.

    PYTHONPATH=. python benchmarks/tick_cooling.py [--rounds 200] [--period 0.02] > benchmarks/tick_cooling_cpu.json

The default model, float32, FPI with 16 iterations. The candidates, each timed alone right after its wait:

- ``kernel``: fused_numba's bare FPI kernel (``fpi``'s compiled entry point on prepared arrays, no row axis);
- ``kernel_evidence``: the node's step kernel with its evidence (``fpi_tick_evidence_batched``, one row);
- ``filter``: ``BeliefFilter.infer`` as the node's tick runs it (evidence on): what ``Beliefs.inference_ms`` times;
- ``pymdp``: pymdp 1.0.4's FPI under ``jax.jit`` on the same inputs (block_until_ready).

Three waits before each call, interleaved round by round: ``none`` (back to back), ``sleep`` (``time.sleep(period)``:
the thread gives its CPU back, as the node's executor does between ticks) and ``evict`` (no sleep; 8 MiB written,
more than this machine's caches, so the caches are cold but the CPU never idled). When ``sleep`` costs more than
``evict``, the wait itself (the CPU's idle state and clock, a virtual CPU descheduled) costs more than cold caches.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bayes_infer_ros.autotune.timing import block, environment  # noqa: E402
from bayes_infer_ros.inference import engine_for_model  # noqa: E402
from bayes_infer_ros.inference.belief_filter import BeliefFilter  # noqa: E402
from bayes_infer_ros.inference.native.engine import kernels  # noqa: E402
from bayes_infer_ros.inference.native.schema import FpiArgs, TickEvidenceAgentsArgs  # noqa: E402
from bayes_infer_ros.model.io import load_model  # noqa: E402

WAITS = ("none", "sleep", "evict")


def candidates(model) -> dict:
    """The four calls on the default model's inputs (one-hot observations, D, the zero control)."""
    engine = engine_for_model(model, "fpi", variant="fused_numba", num_iter=16)
    engine.warmup()
    layout, dt, m, k = engine.layout, engine.dtype, engine.model, kernels()
    S, M = layout.state_size, model.num_modalities
    obs = np.zeros(layout.obs_size, dt)
    obs[list(layout.obs_offsets[:-1])] = 1.0
    prior = np.concatenate(model.D).astype(dt)
    fpi_one, fpi_index = k.fpi_entry(dt, rows=False), m.bind(FpiArgs)[1:]
    evidence_call, evidence_args = k.fpi_tick_evidence_batched_entry(dt), engine._evidence._args(TickEvidenceAgentsArgs)
    rows = obs[None].copy(), prior[None].copy(), np.zeros((1, model.num_factors), np.int32)
    gates = np.full(M, np.inf, dt)
    out_q, out_ev = np.empty(S, dt), np.empty((1, engine._evidence.width), dt)
    filt = BeliefFilter(engine, model.D, 5, model.B is not None)
    filt.set_evidence(True)
    filt.warm(True)
    filt.record(0, obs, None)

    import jax.numpy as jnp

    from lab.harness import pymdp_callable

    fn = pymdp_callable("fpi", model.A_dependencies, model.B_dependencies, 16, 1.0)
    A = [jnp.asarray(a, jnp.float32) for a in model.A]
    o, q = [jnp.asarray(x) for x in layout.split_obs(obs)], [jnp.asarray(x) for x in layout.split_states(prior)]
    return {
        "kernel": lambda: fpi_one(m.log_A, *fpi_index, obs, prior, 16, m.minval, out_q),
        "kernel_evidence": lambda: evidence_call(*evidence_args, *rows[:2], 16, m.minval, rows[2], gates, out_ev),
        "filter": lambda: filt.infer((0,), {0: None}, {0: None}),
        "pymdp": lambda: block(fn(A, o, q)),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--period", type=float, default=0.02, help="seconds of sleep before a 'sleep' call (50 Hz)")
    args = p.parse_args(argv)
    calls = candidates(load_model(ROOT / "config" / "agent.yaml"))
    for fn in calls.values():
        for _ in range(50):
            fn()
    junk = np.zeros(8 << 20, np.uint8)
    times: dict[str, dict[str, list[float]]] = {w: {name: [] for name in calls} for w in WAITS}
    load = os.getloadavg()[0]
    for r in range(args.rounds):
        for i, wait in enumerate(WAITS[r % 3:] + WAITS[:r % 3]):
            for name, fn in calls.items():
                if wait == "sleep":
                    time.sleep(args.period)
                elif wait == "evict":
                    junk += 1
                else:
                    fn()
                t0 = time.perf_counter()
                fn()
                times[wait][name].append(time.perf_counter() - t0)
    out = {"command": "PYTHONPATH=. python benchmarks/tick_cooling.py", "rounds": args.rounds,
           "period_s": args.period, "load_start": load, "load_end": os.getloadavg()[0],
           "environment": environment("float32"), "us": {}}
    for wait, by_name in times.items():
        out["us"][wait] = {name: {"median": round(float(np.median(v)) * 1e6, 2),
                                  "p25": round(float(np.percentile(v, 25)) * 1e6, 2),
                                  "p75": round(float(np.percentile(v, 75)) * 1e6, 2)} for name, v in by_name.items()}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
