"""The default model's fused_numba FPI tick as one numba dispatch against two, hot and after cache pollution.

    PYTHONPATH=. python benchmarks/archive/tick_dispatch_ab.py [--calls 2000] [--pollute-mb 8]

``one``: ``engine.tick`` (``fpi_tick``: beliefs and the next prior in one kernel call). ``two``: ``run_packed``
then the prediction (two dispatches, as before ``fpi_tick``). ``filter``: ``BeliefFilter.infer``, the call the
node times as ``inference_ms``. Every call is timed alone, interleaved call by call (one, two, filter, ...).
``cold``: before each call, a pass over an ``--pollute-mb`` buffer and some Python work evict the caches, as the
node's executor does between ticks; ``hot``: back to back. Median and p90 per path, in microseconds.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # tick_inputs
from bayes_infer_ros.inference import engine_for_model  # noqa: E402
from bayes_infer_ros.inference.belief_filter import BeliefFilter  # noqa: E402
from bayes_infer_ros.model.io import load_model  # noqa: E402
from tick_inputs import default_tick_inputs  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--pollute-mb", type=float, default=8.0)
    args = p.parse_args(argv)
    model = load_model(ROOT / "config" / "agent.yaml")
    obs, prior, zero = default_tick_inputs(model)
    eng = engine_for_model(model, "fpi", variant="fused_numba", num_iter=16)
    eng.warmup()
    ob, pr = eng.layout.pack_obs(obs), eng.layout.pack_states(prior)
    filt = BeliefFilter(eng, model.D, horizon=1, has_B=True)
    filt.record(0, ob, zero)

    calls = {
        "one": lambda: eng.tick(ob, pr, zero),
        "two": lambda: eng._predict_packed(eng.run_packed(ob, pr), zero),
        "filter": lambda: filt.infer((0,), {0: zero}, {0: zero}),
    }
    one, two = calls["one"](), (eng.run_packed(ob, pr), calls["two"]())
    assert np.array_equal(one[0], two[0]) and np.array_equal(one[1], two[1])
    junk = np.ones(int(args.pollute_mb * 2**20 / 8))
    table = {str(i): list(range(20)) for i in range(200)}

    def pollute() -> None:
        junk.sum()
        json.loads(json.dumps(table))

    times = {f"{mode}/{k}": [] for mode in ("hot", "cold") for k in calls}
    for _ in range(50):
        for f in calls.values():
            f()
    for _ in range(args.calls):
        for name, f in calls.items():
            pollute()
            t0 = time.perf_counter()
            f()
            times[f"cold/{name}"].append(time.perf_counter() - t0)
            f()
            t0 = time.perf_counter()
            f()
            times[f"hot/{name}"].append(time.perf_counter() - t0)
    out = {"calls": args.calls, "pollute_mb": args.pollute_mb, "load": os.getloadavg()[0], "cpus": os.cpu_count()}
    for k, v in times.items():
        out[k] = {"median_us": round(float(np.median(v)) * 1e6, 2), "p90_us": round(float(np.percentile(v, 90)) * 1e6, 2)}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
