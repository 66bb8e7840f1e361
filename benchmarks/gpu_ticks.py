"""Default model on a GPU: kernel launches per tick (under ncu) and latency of pymdp vs engine variants.

    python benchmarks/gpu_ticks.py time  [--variants baseline ...]      # round-robin timing table
    ncu --profile-from-start off --csv --metrics gpu__time_duration.sum \\
        python benchmarks/gpu_ticks.py profile --algorithm fpi --variant baseline  # one tick between
                                                                         # cudaProfilerStart/Stop

``profile`` warms the program up, then runs exactly one node tick (the engine's packed call, and for fpi the
next prior) between cudaProfilerStart and cudaProfilerStop, so ncu lists the kernels of one tick. pymdp is
profiled as ``--variant pymdp`` (its jitted algorithm, the arrays as arguments).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax  # noqa: E402

from lab.harness import pymdp_callable  # noqa: E402
from bayes_infer_ros.inference import engine_for_model  # noqa: E402
from bayes_infer_ros.model.io import load_model  # noqa: E402

MODEL = Path(__file__).resolve().parents[1] / "config" / "agent.yaml"


def tick_callable(model, algorithm: str, variant: str, num_iter: int, horizon: int, predict: bool = True):
    """A zero-argument callable running one tick of ``variant`` (or pymdp) on the default model.

    predict: for fpi, also compute the next prior (the node's tick); False times the inference call alone.
    """
    rng = np.random.default_rng(0)
    T = 1 if algorithm == "fpi" else horizon
    obs = []
    for a in model.A:
        o = np.zeros((T, a.shape[0]), np.float32)
        o[np.arange(T), rng.integers(0, a.shape[0], size=T)] = 1
        obs.append(o[0] if algorithm == "fpi" else o)
    prior = [np.asarray(d, np.float32) for d in model.D]
    actions = None if algorithm == "fpi" else np.zeros((T - 1, len(model.D)), np.int32)
    if variant == "pymdp":
        import jax.numpy as jnp

        fn = pymdp_callable(algorithm, model.A_dependencies, model.B_dependencies, num_iter, 1.0)
        A = [jnp.asarray(a, jnp.float32) for a in model.A]
        o = [jnp.asarray(x) for x in obs]
        p = [jnp.asarray(x) for x in prior]
        if algorithm == "fpi":
            return lambda: fn(A, o, p)
        B = [jnp.asarray(b, jnp.float32) for b in model.B]
        acts = jnp.asarray(actions)
        return lambda: fn(A, B, o, p, acts)
    eng = engine_for_model(model, algorithm, variant=variant, num_iter=num_iter)
    ob = eng.layout.pack_obs(obs)
    pr = eng.layout.pack_states(prior)
    if algorithm == "fpi" and not predict:
        return lambda: eng.run_packed(ob, pr)
    if algorithm == "fpi":  # the node's tick: beliefs and next prior back on the host (BeliefFilter's call)
        ob = np.ascontiguousarray(ob, dtype=eng.dtype)
        pr = np.ascontiguousarray(pr, dtype=eng.dtype)
        zero = np.zeros((1, len(model.D)), np.int32)
        return lambda: eng.step(ob[None], pr[None], zero)
    return lambda: eng.run_packed(ob, pr, actions, valid_steps=T)


_FREE = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all", "partition-id",
         "replica-id", "opt-barrier"}


def kernels_from_hlo(text: str) -> int:
    """Kernels one call executes, read off the optimised HLO: every instruction of the entry computation that is
    not free (parameters, tuples, bitcasts, ...), with each while loop counted as trip count x (its body and
    condition). Fusions count once (their inner ops are one kernel)."""
    import re

    comps: dict[str, list[str]] = {}
    name, entry = None, None
    for line in text.splitlines():
        m = re.match(r"^(ENTRY )?%(\S+) .*\{$", line)
        if m:
            name = m.group(2)
            comps[name] = []
            if m.group(1):
                entry = name
            continue
        if line.startswith("}"):
            name = None
        elif name is not None and "=" in line:
            comps[name].append(line)

    def count(comp: str) -> int:
        total = 0
        for ins in comps.get(comp, []):
            m = re.search(r"= \S+(?: \S+)*? ([a-z\-]+)\(", ins)
            op = m.group(1) if m else ""
            if op in _FREE:
                continue
            if op == "while":
                body = re.search(r"body=%(\S+?)[,\s]", ins).group(1)
                cond = re.search(r"condition=%(\S+?)[,\s]", ins).group(1)
                trip = re.search(r'"known_trip_count":\{"n":"(\d+)"', ins)
                n = int(trip.group(1)) if trip else 1
                total += n * (count(body) + count(cond))
                continue
            total += 1
        return total

    return count(entry) if entry else 0


def hlo_counts(args) -> None:
    """Kernels per call from the compiled HLO, every (algorithm, variant); fpi includes the next prior (tick)."""
    import jax.numpy as jnp

    model = load_model(MODEL)
    print(f"device: {jax.devices()[0].device_kind}, jax {jax.__version__}")
    for algorithm in args.algorithms:
        for v in ["pymdp"] + args.variants:
            T = 1 if algorithm == "fpi" else args.horizon
            rng = np.random.default_rng(0)
            obs = [np.eye(a.shape[0], dtype=np.float32)[rng.integers(0, a.shape[0], size=T)] for a in model.A]
            obs = [o[0] for o in obs] if algorithm == "fpi" else obs
            prior = [np.asarray(d, np.float32) for d in model.D]
            actions = np.zeros((T - 1, len(model.D)), np.int32)
            try:
                if v == "pymdp":
                    fn = pymdp_callable(algorithm, model.A_dependencies, model.B_dependencies, args.num_iter, 1.0)
                    A = [jnp.asarray(a, jnp.float32) for a in model.A]
                    B = [jnp.asarray(b, jnp.float32) for b in model.B]
                    call = (A, obs, prior) if algorithm == "fpi" else (A, B, obs, prior, actions)
                    text = fn.lower(*call).compile().as_text()
                else:
                    eng = engine_for_model(model, algorithm, variant=v, num_iter=args.num_iter)
                    ob, pr = eng.layout.pack_obs(obs), eng.layout.pack_states(prior)
                    if algorithm == "fpi":
                        B = None if eng._B_padded is not None else eng._B
                        text = eng._tick.lower(eng._param_buffers, B, eng._B_padded, ob, pr,
                                               np.zeros(len(model.D), np.int32)).compile().as_text()
                    else:
                        text = eng._call_packed.lower(eng._param_buffers, ob, pr, actions, np.int32(T)).compile().as_text()
                print(f"{algorithm:4s} {v:16s} kernels per call: {kernels_from_hlo(text)}")
            except Exception as exc:  # noqa: BLE001 - a variant without a JAX program (fused_numba) is reported
                print(f"{algorithm:4s} {v:16s} -: {type(exc).__name__}: {str(exc)[:80]}")


def profile(args) -> None:
    import cupy

    model = load_model(MODEL)
    tick = tick_callable(model, args.algorithm, args.variant, args.num_iter, args.horizon)
    for _ in range(5):
        jax.block_until_ready(tick())
    cupy.cuda.runtime.deviceSynchronize()
    cupy.cuda.runtime.profilerStart()
    jax.block_until_ready(tick())
    cupy.cuda.runtime.deviceSynchronize()
    cupy.cuda.runtime.profilerStop()


def timing(args) -> None:
    model = load_model(MODEL)
    print(f"device: {jax.devices()[0].device_kind}, jax {jax.__version__}")
    for algorithm in args.algorithms:
        names = ["pymdp"] + args.variants
        # fpi: each variant's inference call, and (":tick") the node's whole tick through the engine's step
        entries = [(v, False) for v in names] + ([(v, True) for v in args.variants] if algorithm == "fpi" else [])
        ticks = {}
        for v, whole in entries:
            name = f"{v}:tick" if whole else v
            try:
                ticks[name] = tick_callable(model, algorithm, v, args.num_iter, args.horizon, predict=whole)
                for _ in range(3):
                    jax.block_until_ready(ticks[name]())
            except Exception as exc:  # a variant refusing the model is reported, not fatal
                print(f"{algorithm} {name}: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}")
                ticks.pop(name, None)
        samples = {v: [] for v in ticks}
        for _ in range(args.rounds):
            for v, fn in ticks.items():
                t0 = time.perf_counter()
                for _ in range(args.calls):
                    jax.block_until_ready(fn())
                samples[v].append((time.perf_counter() - t0) / args.calls)
        base = statistics.median(samples["pymdp"]) if "pymdp" in samples else float("nan")
        for v, xs in samples.items():
            xs.sort()
            med = statistics.median(xs)
            print(f"{algorithm:4s} {v:24s} median {med * 1e6:9.1f} us  p10 {xs[len(xs) // 10] * 1e6:9.1f}  "
                  f"p90 {xs[9 * len(xs) // 10] * 1e6:9.1f}  speedup vs pymdp {base / med:5.2f}x")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("mode", choices=["time", "profile", "hlo"])
    p.add_argument("--algorithm", default="fpi")
    p.add_argument("--algorithms", nargs="+", default=["fpi", "vmp", "mmp"])
    p.add_argument("--variant", default="baseline")
    p.add_argument("--variants", nargs="+", default=["baseline"])
    p.add_argument("--num-iter", type=int, default=16)
    p.add_argument("--horizon", type=int, default=5)
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--calls", type=int, default=20)
    args = p.parse_args()
    {"profile": profile, "time": timing, "hlo": hlo_counts}[args.mode](args)


if __name__ == "__main__":
    main()
