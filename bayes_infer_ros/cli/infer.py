"""``bayes-infer infer``: offline inference on a model file, no ROS needed.

Simulates the model's generative process (seeded, :mod:`bayes_infer_ros.bags.simulate`) and runs the
engine over it with the node's semantics (:func:`bayes_infer_ros.bags.golden.engine_beliefs`: fpi carries
the predicted prior; vmp/mmp keep a window of ``horizon`` steps with prior D), then prints the posterior of
every factor next to the true state.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Optional

import numpy as np

from bayes_infer_ros.bags.bagio import Episode
from bayes_infer_ros.bags.golden import engine_beliefs, posterior_mode_accuracy
from bayes_infer_ros.bags.simulate import simulate
from bayes_infer_ros.inference.algorithm_specs import algorithm_spec
from bayes_infer_ros.model import load_model

DEFAULT_MODEL = Path(__file__).resolve().parents[2] / "config" / "agent.yaml"


def main(argv: Optional[list[str]] = None) -> int:
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
    rollout = simulate(model, args.steps, args.seed)
    episode = Episode(
        stamps_ns=np.arange(args.steps), states=rollout.states, observations=rollout.observations,
        actions=rollout.actions, factor_names=[model.factor_name(f) for f in range(model.num_factors)],
        modality_names=[model.modality_name(i) for i in range(model.num_modalities)], custom_data={},
    )
    print(f"model {args.model}: factors {model.factor_names}, modalities {model.modality_names}")
    print(f"{args.algorithm}/{args.variant}, num_iter={args.num_iter}" + (f", horizon={args.horizon}" if algorithm_spec(args.algorithm).window else ""))
    t0 = time.perf_counter()
    beliefs = engine_beliefs(model, episode, args.algorithm, variant=args.variant, num_iter=args.num_iter, horizon=args.horizon)
    elapsed = time.perf_counter() - t0
    for t in range(args.steps):
        seen = ", ".join(f"{model.modality_name(i)}={model.observation_label_list(i)[rollout.observations[t, i]]}"
                         for i in range(model.num_modalities))
        print(f"t={t:2d}  observed: {seen}")
        for f in range(model.num_factors):
            labels, q, true = model.state_label_list(f), beliefs[f][t], int(rollout.states[t, f])
            probs = " ".join(f"{labels[k]}={q[k]:.3f}" for k in range(len(q)))
            mark = "ok" if int(np.argmax(q)) == true else f"true={labels[true]}"
            print(f"      {model.factor_name(f):>10s}: {probs}  [{mark}]")
    accuracy = posterior_mode_accuracy(beliefs, rollout.states)
    print(f"posterior-mode accuracy: {accuracy}")
    print(f"{args.steps} ticks in {elapsed:.2f} s (the first tick includes compilation)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
