"""Why a tick paced at 50 Hz costs more than the same call back to back: sleeping vs spinning between calls.

    PYTHONPATH=. python benchmarks/tick_cooling.py [--variant fused_numba] [--calls 500]

The default model's one-dispatch FPI tick (``engine.tick``, host arrays out), one engine, nothing else in the
process between calls. Three ways to wait 20 ms between calls, interleaved call by call (sleep, spin, none):
``sleep`` gives the core back (what a node's tick does), ``spin`` keeps it busy without touching the tick's
data, ``none`` is back to back. If ``spin`` is as fast as ``none``, the extra cost of ``sleep`` comes from the
idle core (clock, idle state, a virtual CPU descheduled), not from other work evicting the tick's caches.
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
from bayes_infer_ros.inference import engine_for_model  # noqa: E402
from bayes_infer_ros.model.io import load_model  # noqa: E402
from tick_inputs import default_tick_inputs  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--variant", default="fused_numba")
    p.add_argument("--calls", type=int, default=500)
    p.add_argument("--period", type=float, default=0.02, help="seconds between calls (50 Hz)")
    args = p.parse_args(argv)
    model = load_model(ROOT / "config" / "agent.yaml")
    obs, prior, zero = default_tick_inputs(model)
    eng = engine_for_model(model, "fpi", variant=args.variant, num_iter=16)
    ob, pr = eng.layout.pack_obs(obs), eng.layout.pack_states(prior)

    def tick() -> float:
        t0 = time.perf_counter()
        [np.asarray(x) for x in eng.tick(ob, pr, zero)]
        return time.perf_counter() - t0

    for _ in range(50):
        tick()
    times: dict[str, list[float]] = {"sleep": [], "spin": [], "none": []}
    for _ in range(args.calls):
        time.sleep(args.period)
        times["sleep"].append(tick())
        end = time.perf_counter() + args.period
        while time.perf_counter() < end:
            pass
        times["spin"].append(tick())
        times["none"].append(tick())
    out = {"variant": args.variant, "period_s": args.period, "calls": args.calls,
           "load": os.getloadavg()[0], "cpus": os.cpu_count()}
    for k, v in times.items():
        out[k] = {"median_ms": float(np.median(v)) * 1e3, "p90_ms": float(np.percentile(v, 90)) * 1e3}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
