"""pymdp's T-maze run closed-loop through this package's FPI engine and policy inference, beside pymdp's own agent
on the same seed: the worked example of docs/policy.md.

    python -m lab tmaze-policy [--trials 50] [--steps 5] [--seed 0] [--backend fused_numba|jax]

The maze is pymdp's ``envs.tmaze.TMaze`` (five locations, a cue, a reward arm the environment draws at reset); the
agent is pymdp's ``Agent`` on the maze's A, B, D with :data:`PREFERENCES` and :data:`SETTINGS` (three-step
policies, stochastic selection). Each trial is one agent in its own maze, and pymdp's ``rollout`` runs the trials
as one batch of agents. Ours replays ``rollout``'s steps with the same seed: the beliefs from
``build_inference("fpi", ...)`` (the engine's empirical prior after each action, as pymdp's), the action from
``build_policy_inference`` with the noise of ``ActionNoise(seed, batch_size=trials)``, and the maze stepped with
the environment's own keys of the same chain (``keys[2:]`` at each step). The actions agree step by step, so the
two runs see the same observations throughout.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any, Optional

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
from pymdp.agent import Agent
from pymdp.envs.rollout import rollout
from pymdp.envs.tmaze import TMaze

from bayes_infer_ros.inference import build_inference
from bayes_infer_ros.inference.policy import build_policy_inference

#: C per modality: location (5 levels) none, reward (no outcome, reward, punishment), cue (none, left, right) none.
PREFERENCES = ([0.0] * 5, [0.0, 4.0, -6.0], [0.0] * 3)
#: pymdp Agent's policy settings of the example (policy_len 3: the arms are three moves from the cue).
SETTINGS = dict(policy_len=3, gamma=8.0, alpha=16.0, action_selection="stochastic")
NUM_ITER = 16  # pymdp's default FPI iterations
LOCATIONS = ("centre", "left", "right", "cue", "middle")  # TMaze's locations (an action names the one to go to)


def tmaze() -> tuple[TMaze, dict[str, Any]]:
    """The maze and its model as numpy arrays: A, B, C, D, A_dependencies, B_dependencies."""
    env = TMaze()
    model = dict(A=[np.asarray(a, np.float32) for a in env.A], B=[np.asarray(b, np.float32) for b in env.B],
                 C=[np.asarray(c, np.float32) for c in PREFERENCES], D=[np.asarray(d, np.float32) for d in env.D],
                 A_dependencies=[list(d) for d in env.A_dependencies],
                 B_dependencies=[list(d) for d in env.B_dependencies])
    return env, model


def pymdp_run(trials: int, steps: int, seed: int) -> dict[str, np.ndarray]:
    """pymdp's agent: ``rollout(agent, env, steps, jax.random.PRNGKey(seed))`` with ``trials`` agents ->
    action (b, steps + 1, F), qs (one (b, steps + 1, n_f) per factor), qpi and neg_efe (b, steps + 1, P),
    observation (one (b, steps + 1) per modality)."""
    env, m = tmaze()
    agent = Agent(A=[jnp.asarray(a) for a in m["A"]], B=[jnp.asarray(b) for b in m["B"]],
                  C=[jnp.asarray(c) for c in m["C"]], D=[jnp.asarray(d) for d in m["D"]],
                  A_dependencies=m["A_dependencies"], B_dependencies=m["B_dependencies"], num_iter=NUM_ITER,
                  batch_size=trials, **SETTINGS)
    _, info = rollout(agent, env, steps, jr.PRNGKey(seed))
    return dict(action=np.asarray(info["action"]), qs=[np.asarray(q) for q in info["qs"]],
                qpi=np.asarray(info["qpi"]), neg_efe=np.asarray(info["neg_efe"]),
                observation=[np.asarray(o)[..., 0] for o in info["observation"]])


def our_run(trials: int, steps: int, seed: int, backend: str = "fused_numba",
            variant: str = "fused_numba") -> dict[str, np.ndarray]:
    """The same trials through this package (see the module docstring): the same keys as :func:`pymdp_run`."""
    env, m = tmaze()
    num_obs = [a.shape[0] for a in m["A"]]
    engine = build_inference("fpi", m["A"], m["A_dependencies"], m["B"], m["B_dependencies"], variant=variant,
                             num_iter=NUM_ITER)
    policy = build_policy_inference(m["A"], m["A_dependencies"], m["B"], m["B_dependencies"], m["C"],
                                    policy_len=SETTINGS["policy_len"], gamma=SETTINGS["gamma"],
                                    alpha=SETTINGS["alpha"], selection=SETTINGS["action_selection"],
                                    backend=backend, batch_size=trials)
    noise = policy.noise_stream(seed)
    reset, step = jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step))  # one compile each (as rollout's scan)
    keys = jr.split(jr.PRNGKey(seed), trials + 1)  # rollout: the carried key, then one reset key per agent
    rng = keys[0]
    obs, env_state = reset(keys[1:])
    priors = [[d for d in m["D"]] for _ in range(trials)]
    out: dict[str, list] = {"action": [], "qs": [], "qpi": [], "neg_efe": [], "observation": []}
    for _ in range(steps + 1):
        keys = jr.split(rng, trials + 2)  # rollout's step: carried, agent (ActionNoise follows it), environment
        rng = keys[0]
        index = [np.asarray(o)[:, 0].astype(int) for o in obs]
        beliefs = [engine([np.eye(n, dtype=np.float32)[o[i]] for n, o in zip(num_obs, index)], priors[i])
                   for i in range(trials)]
        result = policy(np.stack([np.concatenate(q) for q in beliefs]), noise.next())
        for key, value in (("action", result.action), ("qpi", result.q_pi), ("neg_efe", result.neg_efe),
                           ("observation", index)):
            out[key].append(value)
        out["qs"].append(beliefs)
        priors = [engine.layout.split_states(engine.predict(np.concatenate(beliefs[i]), result.action[i]))
                  for i in range(trials)]
        obs, env_state = step(keys[2:], env_state, jnp.asarray(result.action))
    F = len(m["B"])
    return dict(action=np.stack(out["action"], axis=1), qpi=np.stack(out["qpi"], axis=1),
                neg_efe=np.stack(out["neg_efe"], axis=1),
                qs=[np.stack([[np.asarray(b[f]) for b in step] for step in out["qs"]], axis=1) for f in range(F)],
                observation=[np.stack([o[mod] for o in out["observation"]], axis=1) for mod in range(len(num_obs))])


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab tmaze-policy", description=__doc__.split("\n")[0])
    p.add_argument("--trials", type=int, default=50)
    p.add_argument("--steps", type=int, default=5, help="steps after the first observation (rollout's num_timesteps)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", default="fused_numba", choices=("fused_numba", "jax"))
    args = p.parse_args(argv)
    theirs = pymdp_run(args.trials, args.steps, args.seed)
    ours = our_run(args.trials, args.steps, args.seed, args.backend)
    same = (theirs["action"] == ours["action"]).all(axis=(1, 2))
    rewards = (ours["observation"][1] == 1).any(axis=1)
    print(f"{args.trials} trials of {args.steps + 1} steps, seed {args.seed}: the same actions as pymdp's agent in "
          f"{int(same.sum())} of {args.trials} trials; the reward found in {int(rewards.sum())}")
    print()
    print("| trial | pymdp's moves (location chosen at each step) | ours | cue seen | first outcome |")
    print("|---|---|---|---|---|")
    for i in range(min(args.trials, 8)):
        cue = {1: "left", 2: "right"}.get(int(ours["observation"][2][i].max()), "none")  # valid 95% of the time
        outcomes = [int(o) for o in ours["observation"][1][i] if o]
        first = {1: "reward", 2: "punishment"}[outcomes[0]] if outcomes else "none"
        moves = lambda run: " ".join(LOCATIONS[int(a)] for a in run["action"][i, :, 0])  # noqa: E731
        print(f"| {i} | {moves(theirs)} | {moves(ours)} | {cue} | {first} |")
    return 0 if same.all() else 1


if __name__ == "__main__":
    sys.exit(main())
