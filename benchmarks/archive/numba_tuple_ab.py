"""fused_numba's entry points with the model's arrays as one tuple argument against positional arguments.

    PYTHONPATH=. python benchmarks/archive/numba_tuple_ab.py [--rounds 2000] [--calls 10] [--cold-calls 1000] [--dtype float32]

The default model (config/agent.yaml: FPI, VMP and MMP, its num_iter, tau and horizon). Per entry point:

* ``old``: the package's entry point as NativeEngine calls it, positional in its schema's order
  (``native/schema.py``): ``fpi`` (9 model arrays), ``sequence`` (16 arrays and has_B), and the node's tick
  ``fpi_tick`` (the model packed in two arrays by ``pack_tick_model``, called through ``fpi_tick_entry``'s compiled
  entry point), each model argument bound once by ``NativeModel.bind``;
* ``new``: the same kernel behind an entry point defined here that takes the model's arrays as one tuple
  (``fpi_tuple``, ``sequence_tuple``; ``fpi_tick_tuple``: the 13 index arrays, log A and B in one tuple, called
  through its compiled entry point as well);
* ``old2``: ``old`` again, a second candidate: old2 / old is the measurement's noise.

``hot``: rounds of ``--calls`` back-to-back calls of each candidate, the candidates interleaved (their order
rotating by one each round); per candidate the median, p10 and p90 over the rounds of the mean time per call.
``cold``: every call timed alone after a pass over an ``--pollute-mb`` buffer (as the node's executor evicts the
caches between ticks), the candidates interleaved call by call; median, p10 and p90 over ``--cold-calls`` calls.
Times in microseconds; the outputs of ``new`` and ``old`` are checked bit for bit first.
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import numba  # noqa: E402

from bayes_infer_ros.inference import engine_for_model  # noqa: E402
from bayes_infer_ros.inference.native.engine import kernels  # noqa: E402
from bayes_infer_ros.inference.native.fp_mode import flush_subnormals, restore_fp_mode  # noqa: E402
from bayes_infer_ros.inference.native.fpi import _fpi, _fpi_into  # noqa: E402
from bayes_infer_ros.inference.native.schema import FpiArgs, ModelIndex, SequenceArgs, TickArgs  # noqa: E402
from bayes_infer_ros.inference.native.sequence import _sequence  # noqa: E402
from bayes_infer_ros.inference.native.tick import _tick_scratch  # noqa: E402
from bayes_infer_ros.inference.native.transitions import _predict_into  # noqa: E402
from bayes_infer_ros.model.io import load_model, read_parameters_yaml  # noqa: E402

njit = numba.njit(nogil=True)


@njit
def fpi_tuple(model, obs, prior, num_iter, minval, out):
    """``fpi`` with model = (log_A, a_off, ll_off, deps, dims, ks, ns, o_off, s_off)."""
    log_A, a_off, ll_off, deps, dims, ks, ns, o_off, s_off = model
    mode = flush_subnormals()
    _fpi(log_A, a_off, ll_off, deps, dims, ks, ns, o_off, s_off, obs, prior, num_iter, minval, out)
    restore_fp_mode(mode)


@njit
def sequence_tuple(model, has_B, kind_vmp, obs, prior, actions, valid_steps, num_iter, tau, minval, out):
    """``sequence`` with model = (log_A, a_off, ll_off, deps, dims, ks, ns, o_off, s_off, B, log_B, b_off, bdeps,
    bdims, bks, ncontrols)."""
    log_A, a_off, ll_off, deps, dims, ks, ns, o_off, s_off, B, log_B, b_off, bdeps, bdims, bks, ncontrols = model
    mode = flush_subnormals()
    _sequence(log_A, a_off, ll_off, deps, dims, ks, ns, o_off, s_off, B, log_B, b_off, bdeps, bdims, bks, ncontrols,
              has_B, kind_vmp, obs, prior, actions, valid_steps, num_iter, tau, minval, out)
    restore_fp_mode(mode)


@njit
def fpi_tick_tuple(model, obs, prior, num_iter, minval, action, out):
    """``fpi_tick`` with model = (the 13 index arrays of ``ModelIndex``, log_A (1, NA), B (1, NB)) in place of
    (ints, floats, n_log_A); the same body."""
    a_off, ll_off, deps, dims, ks, ns, o_off, s_off, b_off, bdeps, bdims, bks, ncontrols, log_A, B = model
    nobs, idx, idx_b, ll, dbuf, wv, c, x, Q, Qp, tmp = _tick_scratch(ll_off, deps, dims, ks, ns, o_off, bdeps, prior)
    mode = flush_subnormals()
    _fpi_into(log_A, a_off, ll_off, deps, dims, ks, ns, o_off, s_off, obs.reshape(1, obs.shape[0]),
              prior.reshape(1, prior.shape[0]), num_iter, minval, out[:1], nobs, idx, ll, dbuf, wv, c, x, Q)
    _predict_into(B, 0, b_off, bdeps, bdims, bks, ncontrols, ns, s_off, out[0], action, out[1], Qp, tmp, idx_b)
    restore_fp_mode(mode)


def random_inputs(engine, T: int, seed: int = 0):
    """One-hot observations of random levels (b = 1, T steps), a Dirichlet prior, zero actions."""
    lay, rng = engine.layout, np.random.default_rng(seed)
    obs = np.zeros((1, T, lay.obs_size), engine.dtype)
    for t in range(T):
        for m, off in enumerate(lay.obs_offsets[:-1]):
            obs[0, t, off + rng.integers(lay.obs_offsets[m + 1] - off)] = 1.0
    prior = np.concatenate([rng.dirichlet(np.ones(n)) for n in lay.num_states]).astype(engine.dtype)[None]
    return obs, prior, np.zeros((1, max(T - 1, 0), len(lay.num_states)), np.int64)


def candidates(model, params: dict, dtype: str) -> dict[str, dict]:
    """entry point -> {"old": call, "new": call, "old2": call}, each call returning its output array."""
    out: dict[str, dict] = {}
    k = kernels()
    for alg in ("fpi", "vmp", "mmp"):
        e = engine_for_model(model, alg, variant="fused_numba", num_iter=params["num_iter"], tau=params["tau"],
                             dtype=dtype)
        m = e.model
        T = 1 if alg == "fpi" else params["horizon"]
        obs, prior, acts = random_inputs(e, T)
        if alg == "fpi":
            o_old, o_new = np.empty((1, e.layout.state_size), e.dtype), np.empty((1, e.layout.state_size), e.dtype)
            ob, fm = obs[:, 0], m.bind(FpiArgs)
            old = (lambda ob=ob, fm=fm, e=e, m=m, o=o_old: (k.fpi(*fm, ob, prior, e.num_iter, m.minval, o), o)[1])
            new = (lambda ob=ob, fm=fm, e=e, m=m, o=o_new: (fpi_tuple(fm, ob, prior, e.num_iter, m.minval, o), o)[1])
            out["fpi"] = {"old": old, "new": new, "old2": old}
            # the node's tick: fpi_tick's compiled entry point against fpi_tick_tuple's
            ints, floats, n_log_A = m.bind(TickArgs)
            tuple_model = (*(getattr(m, n) for n in ModelIndex._fields), np.ascontiguousarray(m.log_A[:1]),
                           np.ascontiguousarray(m.B[:1]))
            f = numba.from_dtype(e.dtype)
            vec = lambda dt: numba.types.Array(numba.from_dtype(np.dtype(dt)), 1, "C")  # noqa: E731
            entry_new = fpi_tick_tuple.compile((numba.typeof(tuple_model), vec(e.dtype), vec(e.dtype),
                                                numba.types.int64, f, vec(np.int32), numba.types.Array(f, 2, "C")))
            entry_old = k.fpi_tick_entry(e.dtype)
            ob1, pr1, act = np.ascontiguousarray(ob[0]), np.ascontiguousarray(prior[0]), np.zeros(len(m.ns), np.int32)
            t_old, t_new = np.empty((2, e.layout.state_size), e.dtype), np.empty((2, e.layout.state_size), e.dtype)
            tick_old = (lambda o=t_old, e=e, m=m: (entry_old(ints, floats, n_log_A, ob1, pr1, e.num_iter, m.minval, act, o),
                                         o)[1])
            tick_new = (lambda o=t_new, e=e, m=m: (entry_new(tuple_model, ob1, pr1, e.num_iter, m.minval, act, o), o)[1])
            out["fpi_tick"] = {"old": tick_old, "new": tick_new, "old2": tick_old}
        else:
            shape = (1, T, e.layout.state_size)
            o_old, o_new = np.empty(shape, e.dtype), np.empty(shape, e.dtype)
            sm, vmp, tau = m.bind(SequenceArgs), alg == "vmp", e.dtype.type(e.tau)
            tm = sm[:-1]  # the 16 arrays; has_B apart
            old = (lambda sm=sm, o=o_old, vmp=vmp, tau=tau, e=e, m=m, obs=obs, prior=prior, acts=acts:
                   (k.sequence(*sm, vmp, obs, prior, acts, -1, e.num_iter, tau, m.minval, o), o)[1])
            new = (lambda tm=tm, o=o_new, vmp=vmp, tau=tau, e=e, m=m, obs=obs, prior=prior, acts=acts:
                   (sequence_tuple(tm, m.has_B, vmp, obs, prior, acts, -1, e.num_iter, tau, m.minval, o), o)[1])
            out[alg] = {"old": old, "new": new, "old2": old}
    return out


def hot(calls: dict, rounds: int, per_round: int) -> dict[str, np.ndarray]:
    names = list(calls)
    times = {n: np.empty(rounds) for n in names}
    for r in range(rounds):
        k = r % len(names)
        for n in names[k:] + names[:k]:
            f = calls[n]
            t0 = time.perf_counter()
            for _ in range(per_round):
                f()
            times[n][r] = (time.perf_counter() - t0) / per_round
    return times


def cold(calls: dict, n_calls: int, pollute_mb: float) -> dict[str, np.ndarray]:
    junk = np.ones(int(pollute_mb * 2**20 / 8))
    names = list(calls)
    times = {n: np.empty(n_calls) for n in names}
    for i in range(n_calls):
        k = i % len(names)
        for n in names[k:] + names[:k]:
            junk.sum()
            t0 = time.perf_counter()
            calls[n]()
            times[n][i] = time.perf_counter() - t0
    return times


def summary(times: dict[str, np.ndarray]) -> str:
    us = {n: np.percentile(t, [10, 50, 90]) * 1e6 for n, t in times.items()}
    cells = [f"{n} {m:.2f} [{p10:.2f}, {p90:.2f}]" for n, (p10, m, p90) in us.items()]
    ratio = lambda a, b: us[a][1] / us[b][1]  # noqa: E731
    return (" | ".join(cells) + f" | new/old {ratio('new', 'old'):.3f} (new - old {us['new'][1] - us['old'][1]:+.2f} us),"
            f" old2/old {ratio('old2', 'old'):.3f}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=2000, help="hot rounds")
    p.add_argument("--calls", type=int, default=10, help="back-to-back calls per candidate and hot round")
    p.add_argument("--cold-calls", type=int, default=1000, help="cold calls per candidate (0: no cold timing)")
    p.add_argument("--pollute-mb", type=float, default=8.0, help="the buffer read before each cold call")
    p.add_argument("--dtype", default="float32")
    args = p.parse_args(argv)
    model = load_model(ROOT / "config" / "agent.yaml")
    params = {"num_iter": 16, "tau": 1.0, "horizon": 5}
    params.update({k: v for k, v in read_parameters_yaml(ROOT / "config" / "agent.yaml").items() if k in params})
    t0 = time.perf_counter()
    entries = candidates(model, params, args.dtype)
    for name, calls in entries.items():
        assert np.array_equal(calls["old"]().copy(), calls["new"]()), name
        for f in calls.values():  # warm: compiled, loaded, caches primed
            for _ in range(50):
                f()
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"# {platform.machine()}, {os.cpu_count()} CPUs, numba {numba.__version__}, {args.dtype}, default model "
          f"(num_iter {params['num_iter']}, tau {params['tau']}, horizon {params['horizon']}); build and compile "
          f"{time.perf_counter() - t0:.0f} s", flush=True)
    print(f"# before: {load}", flush=True)
    print(f"# hot: median [p10, p90] of {args.rounds} rounds' mean per call ({args.calls} calls), us", flush=True)
    for name, calls in entries.items():
        print(f"hot {name}: {summary(hot(calls, args.rounds, args.calls))}", flush=True)
    if args.cold_calls:
        print(f"# cold: median [p10, p90] of {args.cold_calls} calls, each after a {args.pollute_mb:g} MB pass, us",
              flush=True)
        for name, calls in entries.items():
            print(f"cold {name}: {summary(cold(calls, args.cold_calls, args.pollute_mb))}", flush=True)
    print(f"# after: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
