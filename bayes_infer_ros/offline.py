"""``bayes-infer infer``: offline inference on a model file, no ROS needed.

Simulates the model's generative process (seeded), runs the engine tick by tick as the node does
(fpi carries the predicted prior; vmp/mmp keep a window of ``horizon`` steps with prior D) and prints
the posterior of every factor with the true state.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Optional

import numpy as np

DEFAULT_MODEL = Path(__file__).resolve().parents[1] / "config" / "agent.yaml"


def simulate(model, steps: int, seed: int) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
    """(states (steps, F), observations: per modality (steps,) levels, actions (steps, F): a_t leads to s_{t+1})."""
    rng = np.random.default_rng(seed)
    F = model.num_factors
    states = np.zeros((steps, F), dtype=int)
    actions = np.stack([rng.integers(0, u, steps) for u in model.num_controls], axis=-1)
    s = np.array([rng.choice(len(d), p=d / d.sum()) for d in model.D])
    obs = [np.zeros(steps, dtype=int) for _ in model.A]
    for t in range(steps):
        if t > 0:
            prev = s.copy()
            for f, (b, deps) in enumerate(zip(model.B, model.B_dependencies)):
                col = b[(slice(None),) + tuple(prev[d] for d in deps) + (actions[t - 1, f],)]
                s[f] = rng.choice(len(col), p=col / col.sum())
        states[t] = s
        for i, (a, deps) in enumerate(zip(model.A, model.A_dependencies)):
            col = a[(slice(None),) + tuple(s[d] for d in deps)]
            obs[i][t] = rng.choice(len(col), p=col / col.sum())
    return states, obs, actions


def main(argv: Optional[list[str]] = None) -> int:
    from .inference import engine_for_model
    from .model import load_model

    parser = argparse.ArgumentParser(prog="bayes-infer infer", description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(DEFAULT_MODEL), help="model file (.yaml params or .npz)")
    parser.add_argument("--algorithm", default="fpi", choices=["fpi", "vmp", "mmp"])
    parser.add_argument("--variant", default="baseline")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--horizon", type=int, default=5, help="window length for vmp/mmp")
    parser.add_argument("--num-iter", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    model = load_model(args.model)
    engine = engine_for_model(model, args.algorithm, args.variant, num_iter=args.num_iter)
    states, obs, actions = simulate(model, args.steps, args.seed)
    layout = engine.layout
    eye = [np.eye(m, dtype=np.float32) for m in model.num_obs]
    prior = [np.asarray(d, np.float32) for d in model.D]
    H = args.horizon
    print(f"model {args.model}: factors {model.factor_names}, modalities {model.modality_names}")
    print(f"engine: {engine}")
    t0 = time.perf_counter()
    for t in range(args.steps):
        if engine.sequential:
            lo = max(0, t - H + 1)
            o = np.zeros((H, layout.obs_size), np.float32)
            window = layout.pack_obs([eye[i][obs[i][lo:t + 1]] for i in range(len(obs))])
            o[H - len(window):] = window
            acts = np.zeros((H - 1, model.num_factors), np.int32)
            past = actions[lo:t]
            if len(past):
                acts[H - 1 - len(past):] = past
            qs_packed = np.asarray(engine.run_packed(o, layout.pack_states(prior), acts, valid_steps=len(window)))[-1]
            qs = layout.unpack_states(qs_packed)
        else:
            o = layout.pack_obs([eye[i][obs[i][t]] for i in range(len(obs))])
            qs = layout.unpack_states(engine.run_packed(o, layout.pack_states(prior)))
            prior = [np.asarray(p) for p in engine.predict(qs, actions[t])]
        seen = ", ".join(f"{model.modality_name(i)}={model.observation_label_list(i)[obs[i][t]]}" for i in range(len(obs)))
        print(f"t={t:2d}  observed: {seen}")
        for f, q in enumerate(qs):
            labels = model.state_label_list(f)
            top = int(np.argmax(q))
            probs = " ".join(f"{labels[k]}={q[k]:.3f}" for k in range(len(q)))
            mark = "ok" if top == states[t, f] else f"true={labels[states[t, f]]}"
            print(f"      {model.factor_name(f):>10s}: {probs}  [{mark}]")
    print(f"{args.steps} ticks in {time.perf_counter() - t0:.2f} s (first tick includes compilation)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
