"""Where fused_numba's FPI list call spends its time over the bare kernel, layer by layer, and what CPython charges
for the call's form alone: the floor of ``engine(obs, prior)`` in this design.

    PYTHONPATH=. python benchmarks/call_floor.py [--rounds 400] > benchmarks/call_floor_cpu.csv

The models: the default model (``config/agent.yaml``) and the gate's two generated ones (generator seed 0, c0000 and
c0060, F = M = 5), float32, FPI with 16 iterations, one-hot observations and a uniform prior, as ``lab.bench_check``.
The candidates, all timed in the same rounds (``time_round_robin``; the order rotates each round), each layer adding
one thing to the one above it:

- ``bare``: ``fpi_one``'s compiled entry point on the packed obs (O,) and prior (S,), a fresh (S,) output: the gate's
  bare kernel;
- ``gather``: ``fpi_parts``' compiled entry point on the tuple of the M + F arrays (the list call's one numba call:
  it unboxes each array and copies them into one buffer, then runs ``fpi_one``);
- ``gather_views``: the same, then the F belief views of the output (what the list call returns);
- ``closure``: the engine's list entry (``Engine._list_fpi``): the exactness checks of the M + F arrays, then
  ``gather_views``;
- ``list``: ``engine(obs, prior)``, the public call: the closure behind ``Engine.__call__``.

And what CPython and numpy charge for the same forms with no work in them:

- ``noop_instance_call``: an instance with a ``__call__(self, obs, prior, actions=None, valid_steps=None)`` that
  returns None (CPython 3.11 calls an instance through ``slot_tp_call``: an argument tuple, no vectorcall);
- ``views``: the F views of a ready (S,) array.

Per candidate and model: the median over rounds with its p10 and p90 (µs) and ``over_bare_us``, the median over
rounds of the candidate's time minus ``bare``'s in the same round (for the floors: their own time). The rows record
the load average at the start and the machine.
"""
from __future__ import annotations

import argparse
import csv
import operator
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bayes_infer_ros.autotune.timing import environment, loadavg, time_round_robin  # noqa: E402
from bayes_infer_ros.inference import engine_for_model  # noqa: E402
from bayes_infer_ros.inference.native.engine import kernels  # noqa: E402
from bayes_infer_ros.inference.native.schema import FpiArgs  # noqa: E402
from lab.bench_check import _models, _one_hot_rows  # noqa: E402

FIELDS = ("model", "modalities", "factors", "candidate", "median_us", "p10_us", "p90_us", "over_bare_us", "rounds",
          "load", "machine", "cpu", "cpu_count", "python", "dtype")
FLOORS = ("noop_instance_call", "views")


class _NoopCall:
    """The engine's call signature with nothing behind it."""

    def __call__(self, obs: Any, prior: Any, actions: Any = None, valid_steps: Any = None) -> None:
        return None


def candidates(model: Any) -> dict[str, Callable[[], Any]]:
    """{name: zero-argument call} for one model's fused_numba FPI engine (module docstring)."""
    engine = engine_for_model(model, "fpi", variant="fused_numba", num_iter=16)
    engine.warmup()
    layout, dt, k, m = engine.layout, engine.dtype, kernels(), engine.model
    obs, prior = _one_hot_rows(layout, dt)
    obs_list = [np.ascontiguousarray(x) for x in layout.split_obs(obs.copy())]
    prior_list = [np.ascontiguousarray(x) for x in layout.split_states(prior.copy())]
    parts = (*obs_list, *prior_list)
    S, fpi_index = layout.state_size, m.bind(FpiArgs)[1:]
    bare, gather = k.fpi_entry(dt, rows=False), k.parts_entry(dt, len(parts))
    offsets = np.cumsum([0, *(len(x) for x in parts)], dtype=np.int64)
    views = operator.itemgetter(*(slice(a, b) for a, b in zip(layout.state_offsets[:-1], layout.state_offsets[1:])))
    ready, noop, fast = np.empty(S, dt), _NoopCall(), engine._list_fpi

    def gather_views() -> list[np.ndarray]:
        out = np.empty(S, dt)
        gather(parts, offsets, m.log_A, *fpi_index, 16, m.minval, out)
        return [*views(out)] if len(prior_list) > 1 else [views(out)]

    calls = {
        "bare": lambda: bare(m.log_A, *fpi_index, obs, prior, 16, m.minval, np.empty(S, dt)),
        "gather": lambda: gather(parts, offsets, m.log_A, *fpi_index, 16, m.minval, np.empty(S, dt)),
        "gather_views": gather_views,
        "closure": lambda: fast(obs_list, prior_list),
        "list": lambda: engine(obs_list, prior_list),
        "noop_instance_call": lambda: noop(obs_list, prior_list),
        "views": lambda: views(ready),
    }
    want = np.concatenate(engine(obs_list, prior_list))
    for name in ("gather_views", "closure"):  # every layer computes the same beliefs
        np.testing.assert_array_equal(np.concatenate(calls[name]()), want)
    return calls


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=400)
    p.add_argument("--max-time", type=float, default=8.0, help="seconds per model at most")
    args = p.parse_args()
    env, load = environment("float32"), loadavg()
    writer = csv.DictWriter(sys.stdout, FIELDS, extrasaction="ignore")
    writer.writeheader()
    for name, model in _models().items():
        calls = candidates(model)
        t = time_round_robin(calls, rounds=args.rounds, max_time_s=args.max_time)
        base = np.asarray(t["bare"].samples)
        for cand, timing in t.items():
            own = np.asarray(timing.samples)
            over = own if cand in FLOORS else own - base[:len(own)]
            writer.writerow({**env, "model": name, "modalities": model.num_modalities, "factors": model.num_factors,
                             "candidate": cand, "median_us": f"{timing.median_s * 1e6:.3f}",
                             "p10_us": f"{np.percentile(own, 10) * 1e6:.3f}",
                             "p90_us": f"{timing.p90_s * 1e6:.3f}",
                             "over_bare_us": f"{np.median(over) * 1e6:.3f}", "rounds": timing.rounds,
                             "load": f"{load:.2f}"})
        sys.stdout.flush()


if __name__ == "__main__":
    main()
