"""Many agents, one call: throughput in agent-ticks per second of the default model's FPI tick (beliefs and the next
prior) for b agents at once, every candidate and every b timed round-robin in one process.

    python benchmarks/agents_throughput.py --b 1 100 1000 10000 --out benchmarks/agents_throughput_cpu.csv  # host CPU
    JAX_PLATFORMS=cuda python benchmarks/agents_throughput.py --gpu --out ..._<device>.csv       # a GPU session

Candidates (those that cannot be built here are reported and skipped):

* ``fused_numba``: ``NativeEngine.step``, b agents of one model in one call on every CPU the process may use
  (contiguous blocks of agents, one thread each: ``native/host.py``), host CPU;
* ``fused_numba:1 thread``: the same call held to the calling thread (``host.MIN_AGENTS_PER_THREAD`` raised for the
  call): one core, interleaved with the other candidates in the same rounds;
* ``fused_numba_loop``: b calls of the unbatched ``tick`` (what b agents cost without the batch axis);
* ``jax:<variant>``: a batched JAX engine of b copies of the model, ``tick`` (vmapped) in one dispatch, on JAX's
  default device (the CPU here; the GPU under ``JAX_PLATFORMS=cuda``);
* ``fused_cuda`` (``--gpu``): ``CudaEngine.step``, one CUDA launch of b blocks.

Every candidate's beliefs and next priors are checked against fused_numba's tick per agent first (``max_diff``).
The statistic: the median over rounds of the per-call time (a round is the mean of back-to-back calls), its 10th
and 90th percentiles as the spread; agent-ticks per second = b / seconds per call. Each row records the machine,
the versions, the device and the load average before and after.
"""
from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bayes_infer_ros.autotune.timing import environment, loadavg, time_round_robin  # noqa: E402
from bayes_infer_ros.inference import build_inference, engine_for_model  # noqa: E402
from bayes_infer_ros.inference.native import host  # noqa: E402
from bayes_infer_ros.model.io import load_model  # noqa: E402

MODEL = Path(__file__).resolve().parents[1] / "config" / "agent.yaml"
B_VALUES = (1, 10, 100, 1000, 10000)


def agents(model, b: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """b agents' one-hot observations (b, O), priors (b, S) and valid actions (b, F), float32."""
    rng = np.random.default_rng(seed)
    obs = np.concatenate([np.eye(a.shape[0], dtype=np.float32)[rng.integers(0, a.shape[0], b)] for a in model.A], 1)
    prior = np.concatenate([rng.dirichlet(np.ones(len(d)), b).astype(np.float32) for d in model.D], 1)
    action = np.stack([rng.integers(0, B.shape[-1], b) for B in model.B], 1).astype(np.int32)
    return obs, prior, action


def candidates(model, b: int, num_iter: int, jax_variants: list[str], gpu: bool) -> dict:
    """name -> (zero-argument tick of b agents, device, a function returning (beliefs, next) for the check)."""
    obs, prior, action = agents(model, b)
    out = {}
    numba_eng = engine_for_model(model, "fpi", variant="fused_numba", num_iter=num_iter)
    out["fused_numba"] = (lambda: numba_eng.tick(obs, prior, action), "cpu")

    def one_thread():
        every = host.MIN_AGENTS_PER_THREAD
        host.MIN_AGENTS_PER_THREAD = b + 1  # every agent on the calling thread
        try:
            return numba_eng.tick(obs, prior, action)
        finally:
            host.MIN_AGENTS_PER_THREAD = every
    out["fused_numba:1 thread"] = (one_thread, "cpu")

    def loop():
        return [numba_eng.tick(obs[i], prior[i], action[i]) for i in range(b)]
    out["fused_numba_loop"] = (loop, "cpu")
    for v in jax_variants:
        try:
            A = [np.broadcast_to(a, (b,) + a.shape).astype(np.float32) for a in model.A]
            B = [np.broadcast_to(x, (b,) + x.shape).astype(np.float32) for x in model.B]
            eng = build_inference("fpi", A, model.A_dependencies, B, model.B_dependencies, variant=v,
                                  num_iter=num_iter, validate=False)
            out[f"jax:{v}"] = ((lambda e=eng: e.tick(obs, prior, action)), "jax")
        except Exception as exc:  # noqa: BLE001 - a variant refusing the batch is reported, not fatal
            print(f"b={b} jax:{v}: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
    if gpu:
        try:
            ceng = engine_for_model(model, "fpi", variant="fused_cuda", num_iter=num_iter)
            out["fused_cuda"] = (lambda: ceng.tick(obs, prior, action), "gpu")
        except Exception as exc:  # noqa: BLE001
            print(f"b={b} fused_cuda: {type(exc).__name__}: {str(exc)[:160]}", flush=True)
    ref_q, ref_next = numba_eng.tick(obs, prior, action)
    checked = {}
    for name, (fn, dev) in out.items():
        res = fn()
        if name == "fused_numba_loop":
            q, nxt = np.stack([r[0] for r in res]), np.stack([r[1] for r in res])
        else:
            q, nxt = (np.asarray(x) for x in res)
        diff = float(max(np.abs(q - ref_q).max(), np.abs(nxt - ref_next).max()))
        checked[name] = (fn, dev, diff)
    return checked


def summary(rows: list[dict], env: dict, load_start: float, load_end: float) -> str:
    """The console's table of ``rows`` (a row per candidate and b: agent-ticks per second, its p90..p10 spread, us
    per call), then the load average over the run and the machine (``environment``)."""
    lines = [f"{'candidate':22s} {'b':>6s} {'device':>10s} {'agent-ticks/s':>14s} {'p90..p10':>22s} {'us/call':>10s}"]
    for r in rows:
        lines.append(f"{r['candidate']:22s} {r['b']:6d} {r['device']:>10s} {r['agent_ticks_per_s']:14.4g} "
                     f"{r['agent_ticks_per_s_p90']:10.4g}..{r['agent_ticks_per_s_p10']:<10.4g} "
                     f"{r['median_s'] * 1e6:10.1f}")
    lines.append(f"load average {load_start:.2f} -> {load_end:.2f}; {env['machine']} {env['cpu']} x{env['cpu_count']}, "
                 f"jax {env['jax']} ({env['backend']}, {env['device']})")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="CSV to write")
    p.add_argument("--b", type=int, nargs="+", default=list(B_VALUES))
    p.add_argument("--num-iter", type=int, default=16)
    p.add_argument("--jax-variants", nargs="*", default=["fused_pairwise", "end_to_end"])
    p.add_argument("--gpu", action="store_true", help="also fused_cuda (a CUDA device or NUMBA_ENABLE_CUDASIM=1)")
    p.add_argument("--no-loop-above", type=int, default=10000, help="skip fused_numba_loop above this b")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--max-seconds", type=float, default=120.0)
    args = p.parse_args()
    model = load_model(MODEL)
    env = environment("float32")
    load_start = loadavg()
    fns, meta = {}, {}
    for b in args.b:
        for name, (fn, dev, diff) in candidates(model, b, args.num_iter, args.jax_variants, args.gpu).items():
            if name == "fused_numba_loop" and b > args.no_loop_above:
                continue
            key = f"{name}@{b}"
            fns[key] = fn
            meta[key] = (name, b, env["device"] if dev == "jax" else dev, diff)
        print(f"built b={b}", flush=True)
    t0 = time.time()
    timings = time_round_robin(fns, rounds=args.rounds, round_target_s=0.01, max_time_s=args.max_seconds)
    load_end = loadavg()
    rows = []
    for key, t in timings.items():
        name, b, dev, diff = meta[key]
        rows.append({"candidate": name, "b": b, "device": dev, "median_s": t.median_s, "p10_s": t.time_s,
                     "p90_s": t.p90_s, "agent_ticks_per_s": b / t.median_s,
                     "agent_ticks_per_s_p90": b / t.p90_s, "agent_ticks_per_s_p10": b / t.time_s,
                     "rounds": t.rounds, "calls": t.calls, "max_diff_vs_fused_numba": diff,
                     "loadavg_start": load_start, "loadavg_end": load_end, "seconds": round(time.time() - t0, 1),
                     **{f"env_{k}": v for k, v in env.items()}})
    rows.sort(key=lambda r: (r["b"], -r["agent_ticks_per_s"]))
    with open(args.out, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(summary(rows, env, load_start, load_end))
    return 0


if __name__ == "__main__":
    sys.exit(main())
