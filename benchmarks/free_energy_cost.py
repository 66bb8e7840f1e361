"""What the free energy and the surprise cost on the default model's tick, per engine: the tick alone against the
tick with its evidence, all timed round-robin in one process, hot and cold.

    PYTHONPATH=. python benchmarks/free_energy_cost.py --engines fused_numba
    PYTHONPATH=. python benchmarks/free_energy_cost.py --engines baseline,fused_dense,fused_pairwise --append

FPI: ``tick`` is ``engine.step`` of one row (what the node's BeliefFilter calls each tick without evidence);
``evidence`` is ``engine.step`` with a gate per modality (each reading's surprise, the gates, the
beliefs, the next prior and the free energy: one dispatch; what it calls with evidence). VMP / MMP (a full window
of ``horizon`` 5 steps): ``tick`` is ``run_packed`` of the window; ``evidence`` adds the newest reading's surprise
under the predicted prior and the window's free energy (``surprise`` and ``free_energy``: two more dispatches). Every
candidate of the engines of one run is timed in the same rounds (the order rotates each round); the numba engine runs
apart from the JAX ones (``--append``), whose thread-pool programs slow the calls timed next to them. ``hot``: a round is the mean of enough back-to-back calls to last about 2 ms (the
``autotune.timing`` round-robin). ``cold``: one call per candidate and round, each after a pass over an 8 MB buffer
and some Python work that evict the caches, as the node's executor, the middleware and the replay do between two
ticks (``tick_dispatch_ab.py``). Per candidate: the median over rounds with its p10 and p90 (microseconds);
``cost_us`` is the evidence's median minus the tick's, and ``cost_ratio`` that over the tick's median. The rows
record the load average and the machine.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bayes_infer_ros.autotune.timing import environment, loadavg, time_round_robin  # noqa: E402
from bayes_infer_ros.inference import engine_for_model  # noqa: E402
from bayes_infer_ros.model.io import load_model  # noqa: E402
from tick_inputs import default_tick_inputs  # noqa: E402

ENGINES = ("fused_numba", "baseline", "fused_dense", "fused_pairwise")
HORIZON = 5
FIELDS = ("mode", "algorithm", "variant", "tick_median_us", "tick_p10_us", "tick_p90_us", "evidence_median_us",
          "evidence_p10_us", "evidence_p90_us", "cost_us", "cost_ratio", "rounds", "load", "machine", "cpu",
          "cpu_count", "jax", "dtype")


def candidates(model, algorithm: str, variant: str) -> dict:
    """{"tick": call, "evidence": call} for one engine on the default model's inputs (float32)."""
    engine = engine_for_model(model, algorithm, variant=variant, num_iter=16)
    engine.warmup(T=HORIZON, valid_steps=True)
    obs, prior, zero = default_tick_inputs(model)
    layout = engine.layout
    ob, pr = layout.pack_obs(obs), layout.pack_states(prior).astype(np.float32)
    gates = np.full(model.num_modalities, 30.0, np.float32)
    if algorithm == "fpi":
        ob1, pr1, zero1 = ob[None], pr[None], zero[None]
        return {"tick": lambda: engine.step(ob1, pr1, zero1),
                "evidence": lambda: engine.step(ob1, pr1, zero1, gates)}
    window = np.ascontiguousarray(np.tile(ob, (HORIZON, 1)))
    actions = np.zeros((HORIZON - 1, model.num_factors), np.int32)

    def with_evidence():
        q = engine.run_packed(window, pr, actions, valid_steps=HORIZON)
        engine.surprise(window[-1], pr)
        return engine.free_energy(window, pr, q, actions, valid_steps=HORIZON).terms

    return {"tick": lambda: engine.run_packed(window, pr, actions, valid_steps=HORIZON), "evidence": with_evidence}


def time_cold(calls: dict, rounds: int, pollute_mb: float = 8.0) -> dict:
    """{name: per-call seconds}: one call of each candidate per round (the order rotates), each after a cache-evicting
    pass."""
    junk = np.ones(int(pollute_mb * 2**20 / 8))
    table = {str(i): list(range(20)) for i in range(200)}
    names = list(calls)
    times: dict = {n: [] for n in names}
    for r in range(rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            junk.sum()
            json.loads(json.dumps(table))
            t0 = time.perf_counter()
            calls[name]()
            times[name].append(time.perf_counter() - t0)
    return times


def spread(seconds) -> tuple[float, float, float, int]:
    """(median, p10, p90, rounds) of per-round seconds."""
    x = np.asarray(seconds)
    return float(np.median(x)), float(np.percentile(x, 10)), float(np.percentile(x, 90)), int(x.size)


def row(mode: str, algorithm: str, variant: str, tick: tuple, ev: tuple, env: dict, load: float) -> dict:
    """One CSV row from the tick's and the evidence's (median, p10, p90, rounds) in seconds."""
    us = lambda x: round(x * 1e6, 3)  # noqa: E731
    cost = ev[0] - tick[0]
    return {"mode": mode, "algorithm": algorithm, "variant": variant, "tick_median_us": us(tick[0]),
            "tick_p10_us": us(tick[1]), "tick_p90_us": us(tick[2]), "evidence_median_us": us(ev[0]),
            "evidence_p10_us": us(ev[1]), "evidence_p90_us": us(ev[2]), "cost_us": us(cost),
            "cost_ratio": round(cost / tick[0], 4), "rounds": tick[3], "load": load,
            **{k: env[k] for k in ("machine", "cpu", "cpu_count", "jax", "dtype")}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "free_energy_cost_cpu.csv"))
    p.add_argument("--rounds", type=int, default=300)
    p.add_argument("--max-time", type=float, default=240.0, help="seconds of timed rounds at most")
    p.add_argument("--cold-rounds", type=int, default=400)
    p.add_argument("--algorithms", default="fpi,vmp,mmp")
    p.add_argument("--engines", default=",".join(ENGINES), help="variants to time (default: %(default)s)")
    p.add_argument("--append", action="store_true", help="add the rows to --out (a run of other engines, whose "
                   "programs stay out of this run's rounds: XLA's pool threads slow the numba calls next to them)")
    args = p.parse_args(argv)
    model = load_model(ROOT / "config" / "agent.yaml")
    calls = {}
    for algorithm in args.algorithms.split(","):
        for variant in args.engines.split(","):
            for name, fn in candidates(model, algorithm, variant).items():
                calls[(algorithm, variant, name)] = fn
    keys = list(calls)
    named = {"/".join(k): calls[k] for k in keys}
    hot = time_round_robin(named, rounds=args.rounds, max_time_s=args.max_time, min_rounds=args.rounds // 2)
    cold = time_cold(named, args.cold_rounds)
    env, load = environment("float32"), loadavg()
    rows = []
    for mode in ("hot", "cold"):
        for algorithm, variant in dict.fromkeys((a, v) for a, v, _ in keys):
            tick, ev = (f"{algorithm}/{variant}/{c}" for c in ("tick", "evidence"))
            if mode == "hot":
                timed = [(hot[c].median_s, hot[c].time_s, hot[c].p90_s, hot[c].rounds) for c in (tick, ev)]
            else:
                timed = [spread(cold[c]) for c in (tick, ev)]
            rows.append(row(mode, algorithm, variant, *timed, env, load))
    append = args.append and Path(args.out).is_file()
    with open(args.out, "a" if append else "w", newline="") as fh:
        writer = csv.DictWriter(fh, FIELDS)
        if not append:
            writer.writeheader()
        writer.writerows(rows)
    for r in rows:
        print(f"{r['mode']:4s} {r['algorithm']:4s} {r['variant']:15s} tick {r['tick_median_us']:9.2f} us  evidence "
              f"{r['evidence_median_us']:9.2f} us  cost {r['cost_us']:+8.2f} us ({100 * r['cost_ratio']:+.1f}%)")
    print(f"load {load}; {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
