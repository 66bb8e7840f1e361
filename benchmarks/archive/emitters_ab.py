"""XLA:CPU's fusion emitters (its default) against its elemental emitters (``xla_config.CPU_COMPILE_OPTIONS``):
compile time and per-call time of the same engine program, round-robin in one process.

    PYTHONPATH=. python benchmarks/archive/emitters_ab.py > benchmarks/archive/emitters_ab_cpu.txt

Per (model, algorithm, variant): two engines on the same model, one built with ``BAYES_INFER_XLA_FUSION_EMITTERS=1``
(XLA's default) and one without (the engines' setting); each list call's program is lowered and compiled (JAX's
caches cleared first; ``compile`` is XLA's compile alone), then both compiled programs are called on the same
inputs, alternating, ``ROUNDS`` times each after one warm-up call. Their beliefs are compared (``max|diff|``), and
``p10`` / ``median`` are per-call times. Models: the default model (config/agent.yaml) and the generated
configurations c0771 (F = 25, M = 125) and c0863 (F = M = 125) of the lab's cache (``python -m lab generate``).
"""
from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path

import jax
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bayes_infer_ros.inference import build_inference, xla_config  # noqa: E402
from bayes_infer_ros.model.io import load_model  # noqa: E402
from lab.generator import DEFAULT_CACHE, load_or_build, read_index  # noqa: E402
from lab.harness import make_inputs  # noqa: E402

ROUNDS = 60
CASES = [("default", ("fused_pairwise", "hybrid_block", "baseline", "fused_dense")),
         ("c0771", ("fused_pairwise", "hybrid_block", "clustered_hybrid_block")),
         ("c0863", ("fused_pairwise", "hybrid_block", "clustered_hybrid_block"))]


def model_and_inputs(name: str, algorithm: str, rng: np.random.Generator):
    """(model, obs, prior, actions) of the default model or a generated configuration, T = 1 (fpi) or 5."""
    T = 1 if algorithm == "fpi" else 5
    if name == "default":
        model = load_model(ROOT / "config" / "agent.yaml")
        obs = [np.eye(a.shape[0], dtype=np.float32)[rng.integers(a.shape[0], size=T)] for a in model.A]
        obs = [o[0] for o in obs] if algorithm == "fpi" else obs
        prior = [np.full(b.shape[0], 1.0 / b.shape[0], np.float32) for b in model.B]
        actions = None if algorithm == "fpi" else np.zeros((T - 1, len(model.B)), np.int32)
        return model, obs, prior, actions
    spec = {s.config_id: s for s in read_index(DEFAULT_CACHE)}[name]
    model = load_or_build(spec, DEFAULT_CACHE, dtype=np.dtype("float32"))
    inp = make_inputs(spec, model, algorithm, T, np.dtype("float32"))
    return model, inp["obs"], inp["prior"], inp["actions"]


def engine(model, algorithm: str, variant: str, default_emitters: bool):
    if default_emitters:
        os.environ[xla_config.FUSION_EMITTERS] = "1"
    try:
        return build_inference(algorithm, model.A, model.A_dependencies, model.B, model.B_dependencies,
                               variant=variant, num_iter=16)
    finally:
        os.environ.pop(xla_config.FUSION_EMITTERS, None)


def main() -> None:
    print(f"# {platform.node()} {os.cpu_count()} cores, jax {jax.__version__}, load {os.getloadavg()[0]:.2f}; "
          f"elemental options {xla_config.CPU_COMPILE_OPTIONS}")
    rng = np.random.default_rng(0)
    for name, variants in CASES:
        for algorithm in ("fpi", "vmp", "mmp"):
            model, obs, prior, actions = model_and_inputs(name, algorithm, rng)
            for variant in variants:
                calls, compile_s, outs = {}, {}, {}
                for arm, default in (("fusion", True), ("elemental", False)):
                    eng = engine(model, algorithm, variant, default)
                    jax.clear_caches()
                    lowered = eng.lower(obs, prior, actions)
                    t0 = time.perf_counter()
                    compiled = lowered.compile()
                    compile_s[arm] = time.perf_counter() - t0
                    o = [eng._input(x) for x in obs]
                    p = [eng._input(x) for x in prior]
                    acts = eng._actions(tuple(o[0].shape[:-1]), actions)
                    calls[arm] = (lambda c=compiled, e=eng, o=o, p=p, a=acts:
                                  jax.block_until_ready(c(e._param_buffers, o, p, a, None)))
                    outs[arm] = [np.asarray(q) for q in calls[arm]()]
                diff = max(float(np.max(np.abs(a - b))) for a, b in zip(outs["fusion"], outs["elemental"]))
                times: dict[str, list[float]] = {arm: [] for arm in calls}
                for _ in range(ROUNDS):
                    for arm, call in calls.items():
                        t0 = time.perf_counter()
                        call()
                        times[arm].append(time.perf_counter() - t0)
                p10 = {arm: float(np.percentile(t, 10)) for arm, t in times.items()}
                med = {arm: float(np.median(t)) for arm, t in times.items()}
                print(f"{name} {algorithm} {variant}: compile fusion {compile_s['fusion']:.2f} s elemental "
                      f"{compile_s['elemental']:.2f} s | p10 fusion {p10['fusion'] * 1e6:.0f} us elemental "
                      f"{p10['elemental'] * 1e6:.0f} us (elemental/fusion {p10['elemental'] / p10['fusion']:.3f}, "
                      f"median {med['elemental'] / med['fusion']:.3f}) | max|diff| {diff:.1e}", flush=True)
    print(f"# load at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
