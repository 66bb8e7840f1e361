"""Policy inference against pymdp's jitted ``infer_policies``, round-robin in one process: the default model and
generated models with 1-3 controlled factors and 1-3 step policies (issue #44: at least 3x pymdp in the median).

    PYTHONPATH=. python benchmarks/policy_speed.py                  # the full grid -> policy_speed_<device>.csv
    PYTHONPATH=. python benchmarks/policy_speed.py --quick          # a few cases, short rounds (a smoke run)
    PYTHONPATH=. python benchmarks/policy_speed.py --tick           # only the node's tick without / with it

Per case, three candidates timed in the same rounds (``autotune.timing.time_round_robin``, the order rotating each
round), float32, one agent, the same beliefs:

* ``pymdp``: pymdp 1.0.4's ``Agent.infer_policies`` under ``jax.jit``, with only the arrays it reads (A, B, C, E,
  gamma) as arguments and the beliefs already on the device (pymdp pays no dispatch for the agent's other leaves);
* ``fused_numba``: ``build_policy_inference(..., backend="fused_numba")`` called with the packed beliefs (numpy):
  neg_efe, q_pi and the deterministic action in one kernel call;
* ``jax``: the same with ``backend="jax"`` (one jitted program on JAX's default device).

On the default model two more candidates share the rounds: ``tick`` (the node's tick without ROS: one observation
of every modality admitted, then ``TickLoop.step``, the fused_numba FPI step with its evidence, as configure builds
it) and ``tick+policy`` (the same tick with the policy stage: ``deploy_policy``, one call after the beliefs): the
node's tick with policy inference against the tick without it (issue #44: within 2x).

Generated models are ``lab.generator`` configurations given controls and C by ``generator.with_controls``: its
first k factors get ``--controls`` controls each. Rows: one per case and candidate, with the median over rounds
(``median_us``) and its p10 / p90, the first call (trace and compile), ``speedup`` = pymdp's median over the
candidate's, and the machine, versions, dtype and load average of the run. XLA's thread pool slows a numba call
timed right after a JAX program on a small machine (``free_energy_cost.py``); the issue asks for the comparison
side by side, so they share the rounds here: the speedups are if anything understated. The markdown table printed
at the end is the CSV's, by case.
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import importlib.metadata
import math
import re
import sys
from pathlib import Path
from typing import Any, Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "benchmarks"))
from bayes_infer_ros.autotune import EngineConfig, engine_for  # noqa: E402
from bayes_infer_ros.autotune.deployment import deploy_policy  # noqa: E402
from bayes_infer_ros.autotune.timing import environment, loadavg, time_round_robin  # noqa: E402
from bayes_infer_ros.inference.policy import policy_inference_for_model  # noqa: E402
from bayes_infer_ros.model import GenerativeModel, load_model  # noqa: E402
from bayes_infer_ros.node.policy_stage import PolicyStage, policy_plan  # noqa: E402
from bayes_infer_ros.node.settings import PolicySettings  # noqa: E402
from bayes_infer_ros.node.surprise import settings_from_parameters  # noqa: E402
from bayes_infer_ros.node.tick_loop import TickLoop  # noqa: E402
from lab import generator, pymdp_oracle  # noqa: E402

GENERATED = ("c0000",)  # F = M = 5, modalities on up to 4 factors
FIELDS = ("case", "model", "factors", "controlled", "num_controls", "policy_len", "num_policies", "tree_nodes",
          "candidate", "median_us", "p10_us", "p90_us", "first_call_s", "rounds", "speedup", "load", "machine", "cpu",
          "cpu_count", "python", "jax", "jaxlib", "numba", "pymdp", "backend", "device", "dtype")


def pymdp_call(model: GenerativeModel, policy_len: int, qs: list) -> Callable[[], Any]:
    """pymdp's jitted infer_policies with only the arrays it reads as arguments (see the module docstring)."""
    agent = pymdp_oracle.policy_agent(model.A, model.B, model.A_dependencies, model.B_dependencies, model.C,
                                      model.E, policy_len=policy_len)

    @jax.jit
    def infer(A, B, C, E, gamma, qs):
        with_arrays = eqx.tree_at(lambda a: (a.A, a.B, a.C, a.E, a.gamma), agent, (A, B, C, E, gamma))
        return with_arrays.infer_policies(qs)

    args = jax.device_put((agent.A, agent.B, agent.C, agent.E, agent.gamma,
                           [jnp.asarray(q, jnp.float32)[None, None] for q in qs]))
    return lambda: infer(*args)


def tick_calls(model: GenerativeModel, policy_len: int) -> dict[str, Callable[[], Any]]:
    """The node's tick on ``model`` without and with policy inference (``policy_len`` steps): each call admits one
    observation of every modality (levels cycling) and runs ``TickLoop.step`` for the node's one agent."""
    engine = engine_for(model, EngineConfig("fpi", "fused_numba", 16, 1.0, 5, 0, "cpu", 1), "fused_numba")
    engine.warmup()
    names = [model.modality_name(i) for i in range(model.num_modalities)]
    planned = policy_plan(PolicySettings(inference="enabled"), dataclasses.replace(model, policy_len=policy_len))
    stage = PolicyStage(deploy_policy(planned), np.concatenate(model.D))
    loops = {"tick": TickLoop(model, engine, 5, (), settings_from_parameters({}, names, 10, 100)),
             "tick+policy": TickLoop(model, engine, 5, (), settings_from_parameters({}, names, 10, 100), stage)}
    counter = [0]

    def tick(loop: TickLoop) -> Any:
        counter[0] += 1
        stamp = counter[0] * 1_000_000
        inputs = loop.agent_inputs[0]
        for i, m in enumerate(model.num_obs):
            inputs.observe(i, counter[0] % m, [], stamp // 10**9, stamp % 10**9, now=0.0, now_ns=stamp, arrival=0.0,
                           timeout_s=0.0, max_future_s=0.5)
        return loop.step(stamp, [0])

    return {name: (lambda loop=loop: tick(loop)) for name, loop in loops.items()}


def cases(quick: bool, controls: int) -> list[tuple[str, GenerativeModel, int, int]]:
    """(name, model, controlled factors, policy_len) of the grid."""
    default = load_model(ROOT / "config" / "agent.yaml").with_dtype(np.float32)
    out = [("default", default, 1, T) for T in ((1, 3) if quick else (1, 2, 3))]
    specs = {s.config_id: s for s in generator.generate_specs()}
    for cid in GENERATED:
        base = generator.build_model(specs[cid])
        grid = [(3, 2)] if quick else [(k, T) for k in (1, 2, 3) for T in (1, 2, 3)]
        for k, T in grid:
            out.append((cid, generator.with_controls(base, list(range(k)), controls, seed=k), k, T))
    return out


def versions() -> dict[str, str]:
    out = {}
    for name, dist in (("numba", "numba"), ("pymdp", "inferactively-pymdp")):
        try:
            out[name] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[name] = ""
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=None, help="CSV path (default: benchmarks/policy_speed_<device>.csv)")
    p.add_argument("--quick", action="store_true", help="three cases, short rounds: checks the script runs")
    p.add_argument("--tick", action="store_true", help="only the default model's tick without / with policy "
                                                       "inference (policy_len 1, 2, 3); prints, writes no CSV")
    p.add_argument("--controls", type=int, default=2, help="controls of each controlled factor of generated models")
    p.add_argument("--rounds", type=int, default=60)
    p.add_argument("--max-time", type=float, default=6.0, help="seconds of timed rounds per case at most")
    args = p.parse_args(argv)
    rounds, max_time = (10, 1.0) if args.quick else (args.rounds, args.max_time)
    env = environment("float32")
    slug = "cpu" if env["backend"] == "cpu" else re.sub(r"[^a-z0-9]+", "_", env["device"].lower()).strip("_")
    out_path = Path(args.out) if args.out else ROOT / "benchmarks" / f"policy_speed_{slug}.csv"
    env.update(versions())
    if args.tick:
        return tick_only(rounds, max_time)
    rows = []
    for name, model, controlled, T in cases(args.quick, args.controls):
        rng = np.random.default_rng(0)
        qs = [rng.dirichlet(np.ones(n)).astype(np.float32) for n in model.num_states]
        packed = np.concatenate(qs)
        numba_policy = policy_inference_for_model(model, policy_len=T, backend="fused_numba")
        jax_policy = policy_inference_for_model(model, policy_len=T, backend="jax")
        calls = {"pymdp": pymdp_call(model, T, qs), "fused_numba": lambda: numba_policy(packed),
                 "jax": lambda: jax_policy(packed)}
        if name == "default":
            calls.update(tick_calls(model, T))
        timed = time_round_robin(calls, rounds=rounds, max_time_s=max_time, min_rounds=min(rounds, 10))
        load = loadavg()
        reference = timed["pymdp"].median_s
        for candidate, t in timed.items():
            rows.append({
                "case": f"{name} k={controlled} T={T}", "model": name, "factors": model.num_factors,
                "controlled": controlled, "num_controls": max(model.num_controls), "policy_len": T,
                "num_policies": numba_policy.num_policies, "tree_nodes": numba_policy.plan.tree.num_nodes,
                "candidate": candidate, "median_us": round(t.median_s * 1e6, 2), "p10_us": round(t.time_s * 1e6, 2),
                "p90_us": round(t.p90_s * 1e6, 2), "first_call_s": round(t.first_call_s, 3), "rounds": t.rounds,
                "speedup": round(reference / t.median_s, 2) if candidate in ("pymdp", "fused_numba", "jax") else "",
                "load": load, **{k: env[k] for k in FIELDS if k in env}})
        print(f"{rows[-1]['case']}: " + ", ".join(f"{c} {timed[c].median_s * 1e6:.1f} us" for c in timed), flush=True)
    with open(out_path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"\n{env['machine']} ({env['cpu']}, {env['cpu_count']} CPUs), jax {env['jax']}, numba {env['numba']}, "
          f"pymdp {env['pymdp']}, {env['backend']} ({env['device']}), float32; load {rows[-1]['load']}: {out_path}\n")
    print("| case | policies | pymdp (us) | fused_numba (us) | speedup | jax (us) | speedup |")
    print("|---|---|---|---|---|---|---|")
    by_case: dict[str, dict] = {}
    for r in rows:
        by_case.setdefault(r["case"], {})[r["candidate"]] = r
    for case, c in by_case.items():
        numba, jx = c["fused_numba"], c["jax"]
        print(f"| {case} | {c['pymdp']['num_policies']} | {c['pymdp']['median_us']} | {numba['median_us']} | "
              f"{numba['speedup']}x | {jx['median_us']} | {jx['speedup']}x |")
    for case, c in by_case.items():
        if "tick" in c:
            print(f"\n{case}: the node's tick {c['tick']['median_us']} us, with policy inference "
                  f"{c['tick+policy']['median_us']} us ({c['tick+policy']['median_us'] / c['tick']['median_us']:.2f}x)")
    return 0


def tick_only(rounds: int, max_time: float) -> int:
    """``--tick``: the default model's tick without / with policy inference, each policy length in its own rounds."""
    model = load_model(ROOT / "config" / "agent.yaml").with_dtype(np.float32)
    model = dataclasses.replace(model, C=[np.zeros(m, np.float32) for m in model.num_obs])
    for T in (1, 2, 3):
        timed = time_round_robin(tick_calls(model, T), rounds=rounds, max_time_s=max_time, min_rounds=min(rounds, 10))
        plain, policy = timed["tick"], timed["tick+policy"]
        pairs = np.asarray(list(zip(policy.samples, plain.samples)), float)
        print(f"default model, policy_len {T} ({math.prod(model.num_controls) ** T} policies): the node's tick "
              f"{plain.median_s * 1e6:.1f} us, with policy inference {policy.median_s * 1e6:.1f} us "
              f"({policy.median_s / plain.median_s:.2f}x; per round {np.median(pairs[:, 0] / pairs[:, 1]):.2f}x), "
              f"p90 {plain.p90_s * 1e6:.1f} / {policy.p90_s * 1e6:.1f} us; {policy.rounds} rounds; load {loadavg()}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
