"""node/policy_stage.py in the node's tick loop: policy inference after the beliefs equals pymdp 1.0.4's
``Agent.infer_policies`` and ``sample_action`` on the default model (given C) and on a generated model with
dependencies; with ``policy.publish_controls`` the tick loop runs pymdp's closed loop and picks its actions (and
``~/reset`` restarts ``policy.seed``'s stream); settings that do not fit the model are refused at configure, before
any engine build, naming the parameter; configure compiles every call the policy step makes."""
from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Optional

import numpy as np
import pytest

from bayes_infer_ros.model import GenerativeModel
from bayes_infer_ros.node import runtime as runtime_module
from bayes_infer_ros.node.policy_stage import policy_plan
from bayes_infer_ros.node.runtime import AgentRuntime
from bayes_infer_ros.node.settings import NodeSettings, PolicySettings
from bayes_infer_ros.node.warmup import node_parameters
from policy_cases import DEFAULT_C_PARAMETERS
from tolerances import FLOAT32_ATOL, FLOAT32_RTOL

S = 1_000_000_000
LOG = SimpleNamespace(info=lambda *a: None, warning=lambda *a: None, error=lambda *a: None)


def default_values(repo_root, **policy) -> dict:
    """config/agent.yaml's values (the inline model) with the tests' C and ``policy.<name>`` settings."""
    return node_parameters(repo_root / "config" / "agent.yaml") | DEFAULT_C_PARAMETERS | {
        f"policy.{k}": v for k, v in policy.items()}


def default_model(repo_root) -> GenerativeModel:
    from bayes_infer_ros.model import model_from_parameters

    values = default_values(repo_root)
    return model_from_parameters({k: v for k, v in values.items() if k.startswith("model.")})


# ---- refusals at configure ------------------------------------------------------------------------------------
def _configure_refused(monkeypatch, values: dict) -> str:
    """configure's error for ``values``, asserting that no engine was built."""
    builds = []
    monkeypatch.setattr(runtime_module, "deploy_settings", lambda *a, **k: builds.append(a) or pytest.fail("built"))
    settings = NodeSettings.from_values(values | {"jax_compilation_cache_dir": "", "variant": "baseline"})
    runtime = AgentRuntime(settings, LOG, lambda: 0, lambda: False, lambda *a: None)
    with pytest.raises(Exception) as err:
        runtime.configure(settings, 0.05, lambda: True, lambda back: None)
    assert builds == [] and not runtime.configured
    return str(err.value)


def _without_B(values: dict) -> dict:
    return {k: v for k, v in values.items() if not k.startswith("model.B.")}


@pytest.mark.parametrize("change,key,fragment", [
    (dict(inference="enabled"), "policy.inference", "needs the model's transitions B"),
    ({"model.E": [0.5, 0.5]}, "model.E", "expected (3,): one prior probability per policy"),
    ({"model.E": [0.1] * 9, "policy.len": 1}, "model.E", "expected (3,)"),
    (dict(len=2, policies=[0, 0, 0, 1, 0, 0, 2, 0, 0, 3, 0, 0]), "policy.policies[1][1][0]",
     "control 3 out of range"),
    (dict(policies=[0, 0, 0, 1]), "policy.policies", "expected a multiple of policy.len x factors"),
    (dict(len=64), "policy.len", "more than the limit"),
    ({"model.C.charging": [1.0, 2.0, 3.0]}, "model.C.charging", "shape (3,), expected (2,)"),
])
def test_settings_that_do_not_fit_the_model_are_refused_before_any_engine_build(monkeypatch, repo_root, change, key,
                                                                               fragment):
    values = default_values(repo_root)
    for name, value in change.items():
        values["policy." + name if "." not in name else name] = value
    if key == "policy.inference":  # the model without B: each factor's size from the modalities that read it
        values = _without_B(values)
    error = _configure_refused(monkeypatch, values)
    assert error.startswith(f"{key}:") and fragment in error, error


def test_a_model_file_with_its_own_policies_refuses_another_policy_len(monkeypatch, tmp_path, repo_root):
    from bayes_infer_ros.model import save_model

    model = dataclasses.replace(default_model(repo_root), policies=np.array([[[0, 0, 0]], [[1, 0, 0]]]))
    save_model(model, tmp_path / "m.npz")
    error = _configure_refused(monkeypatch, {"model_file": str(tmp_path / "m.npz"), "policy.len": 2})
    assert error.startswith("policy.len: 2 steps, but the model file lists its policies of 1 step(s)"), error


def test_auto_runs_policy_inference_for_a_model_with_C_and_B(repo_root):
    with_C = default_model(repo_root)
    without_C = dataclasses.replace(with_C, C=None)
    assert policy_plan(PolicySettings(), with_C).num_policies == 3
    assert policy_plan(PolicySettings(), without_C) is None
    assert policy_plan(PolicySettings(inference="enabled"), without_C).num_policies == 3  # pymdp's default C
    assert policy_plan(PolicySettings(inference="disabled"), with_C) is None
    no_B = dataclasses.replace(with_C, B=None, E=None)
    assert policy_plan(PolicySettings(), no_B) is None
    with pytest.raises(ValueError, match="^policy.inference: enabled needs"):
        policy_plan(PolicySettings(inference="enabled"), no_B)
    plan = policy_plan(PolicySettings(gamma=4.0, terms=("utility",), selection="stochastic"), with_C)
    assert (plan.gamma, plan.use_utility, plan.use_states_info_gain, plan.stochastic) == (4.0, True, False, True)


# ---- the tick loop against pymdp ------------------------------------------------------------------------------
def policy_loop(model: GenerativeModel, settings: PolicySettings, agents: tuple = ()):
    """The node's tick loop of ``model`` (fused_numba fpi, 16 iterations) with its policy stage, built as configure
    builds them (``deploy_policy``)."""
    from bayes_infer_ros.autotune import EngineConfig, engine_for
    from bayes_infer_ros.autotune.deployment import deploy_policy
    from bayes_infer_ros.node.policy_stage import PolicyStage
    from bayes_infer_ros.node.tick_loop import TickLoop

    b = max(len(agents), 1)
    engine = engine_for(model, EngineConfig("fpi", "fused_numba", 16, 1.0, 5, 0, "cpu", b), "fused_numba")
    plan = policy_plan(settings, model)
    stage = PolicyStage(deploy_policy(plan, b, settings.seed), np.concatenate(model.D), settings.seed,
                        settings.publish_controls)
    return TickLoop(model, engine, 5, agents, None, stage)


def observe_all(loop, k: int, levels, stamp_ns: int) -> None:
    """Agent ``k`` reads level ``levels[i]`` on every modality i, stamped ``stamp_ns``."""
    for i, level in enumerate(levels):
        got = loop.agent_inputs[k].observe(i, int(level), [], stamp_ns // S, stamp_ns % S, now=stamp_ns / S,
                                           now_ns=stamp_ns, arrival=0.0, timeout_s=0.0, max_future_s=0.5)
        assert got.ok, got


def pymdp_agent(model: GenerativeModel, settings: PolicySettings, batch_size: int = 1):
    from lab import pymdp_oracle

    kw = dict(policies=model.policies) if model.policies is not None else dict(policy_len=model.horizon)
    return pymdp_oracle.policy_agent(
        model.A, model.B, model.A_dependencies, model.B_dependencies, model.C, model.E, gamma=settings.gamma,
        alpha=settings.alpha, use_utility="utility" in settings.terms,
        use_states_info_gain="states_info_gain" in settings.terms, action_selection=settings.selection,
        sampling_mode=settings.sampling_mode, batch_size=batch_size, **kw)


def pymdp_keys(model: GenerativeModel, settings: PolicySettings, steps: int, agents: int = 1) -> Optional[list]:
    """pymdp's sampling keys (b, 2) of ``steps`` steps of ``rollout(..., PRNGKey(policy.seed))`` (None when
    deterministic)."""
    from bayes_infer_ros.inference.action_noise import ActionNoise

    if settings.selection != "stochastic":
        return None
    sizes = (model.num_policies,) if settings.sampling_mode == "full" else model.num_controls
    stream = ActionNoise(settings.seed, sizes, np.float32, agents)
    keys = []
    for _ in range(steps):
        stream.next()
        keys.append(stream.keys())
    return keys


def check_step_against_pymdp(model, agent, step, beliefs, keys=None):
    """One tick's policy step against pymdp's infer_policies and sample_action on the same beliefs."""
    from lab import pymdp_oracle

    split = np.split(np.asarray(beliefs, np.float32), np.cumsum(model.num_states)[:-1])
    q_pi, neg_efe = pymdp_oracle.infer_policies(agent, [q[None] for q in split])
    np.testing.assert_allclose(step.neg_efe, neg_efe[0], rtol=FLOAT32_RTOL, atol=FLOAT32_ATOL)
    np.testing.assert_allclose(step.q_pi, q_pi[0], rtol=0, atol=FLOAT32_ATOL)
    np.testing.assert_array_equal(step.controls, pymdp_oracle.sample_action(agent, q_pi, keys)[0])


def random_levels(model, rng) -> list[int]:
    return [int(rng.integers(m)) for m in model.num_obs]


@pytest.mark.heavy
@pytest.mark.oracle
@pytest.mark.numba
@pytest.mark.parametrize("policy", [dict(len=2, gamma=4.0), dict(selection="stochastic", alpha=2.0, seed=5),
                                    dict(sampling_mode="marginal", terms=["states_info_gain"])])
def test_the_default_models_ticks_equal_pymdp(repo_root, policy):
    """Ticks of the default model (with C) under the bag's kind of input, its controls from `controls`: each tick's
    neg_efe, q_pi and action equal pymdp's on the tick's beliefs (stochastic: with the keys of pymdp's rollout with
    policy.seed)."""
    settings = NodeSettings.from_values(default_values(repo_root, **policy))
    model = default_model(repo_root).with_dtype(np.float32)
    model = dataclasses.replace(model, policy_len=settings.policy.len or None)
    loop = policy_loop(model, settings.policy)
    agent = pymdp_agent(model, settings.policy)
    rng = np.random.default_rng(3)
    steps = 8
    keys = pymdp_keys(model, settings.policy, steps)
    for t in range(steps):
        stamp = (t + 1) * S
        loop.add_control(0, [int(rng.integers(3)), 0, 0], [], stamp // S - 1, S // 2, stamp)
        observe_all(loop, 0, random_levels(model, rng), stamp)
        [(_, out)] = loop.step(stamp, [0])
        assert out.policy is not None and not out.policy.fed_back and out.policy.seconds > 0
        check_step_against_pymdp(model, agent, out.policy, out.posterior, None if keys is None else keys[t])
        if settings.policy.sampling_mode == "marginal":
            assert out.policy.policy == -1
        else:  # the chosen policy's first step
            np.testing.assert_array_equal(out.policy.controls, loop.policy.policies[out.policy.policy, 0])


def dependent_model(seed: int = 0) -> GenerativeModel:
    """A generated model with dependencies: three factors (two controlled), modalities on two factors, transitions
    that depend on another factor; C and E drawn."""
    from bayes_infer_ros.inference.policy import construct_policies
    from oracle import random_case

    num_states, num_controls = (3, 3, 2), (2, 3, 1)
    case = random_case(seed, num_states, ([0, 1], [2], [0, 2]), (3, 2, 4), B_deps=([0], [1, 0], [2, 1]),
                       num_controls=num_controls, T=2)
    rng = np.random.default_rng(seed + 1)
    P = len(construct_policies(num_controls, 2))
    return GenerativeModel(A=case.A, A_dependencies=case.A_deps, B=case.B, B_dependencies=case.B_deps,
                           D=[np.full(n, 1.0 / n, np.float32) for n in num_states],
                           C=[(2.0 * rng.normal(size=m)).astype(np.float32) for m in (3, 2, 4)],
                           E=rng.dirichlet(np.ones(P)).astype(np.float32), policy_len=2).validate()


def environment(model: GenerativeModel, seed: int):
    """The model as the world: a hidden state drawn from D, stepped through B under the agent's actions, read
    through A. -> (observe() -> the levels, act(action))."""
    rng = np.random.default_rng(seed)

    def draw(p):
        p = np.asarray(p, np.float64)
        return int(rng.choice(len(p), p=p / p.sum()))

    state = [draw(d) for d in model.D]

    def observe() -> list[int]:
        return [draw(a[(slice(None),) + tuple(state[f] for f in deps)]) for a, deps in zip(model.A,
                                                                                            model.A_dependencies)]

    def act(action) -> None:
        state[:] = [draw(b[(slice(None),) + tuple(state[d] for d in deps) + (int(action[f]),)])
                    for f, (b, deps) in enumerate(zip(model.B, model.B_dependencies))]

    return observe, act


def run_closed_loop(loop, model, env_seed: int, steps: int) -> dict:
    """``steps`` ticks of the tick loop in the model's world: its fed-back controls are the world's actions."""
    observe, act = environment(model, env_seed)
    out: dict[str, list] = {"levels": [], "action": [], "beliefs": [], "q_pi": []}
    for t in range(steps):
        levels = observe()
        observe_all(loop, 0, levels, (t + 1) * S)
        [(_, tick)] = loop.step((t + 1) * S, [0])
        assert tick.policy.fed_back
        act(tick.policy.controls)
        for key, value in (("levels", levels), ("action", tick.policy.controls), ("beliefs", tick.posterior.copy()),
                           ("q_pi", tick.policy.q_pi)):
            out[key].append(value)
    return {k: np.asarray(v) for k, v in out.items()}


def check_closed_loop_against_pymdp(model, settings: PolicySettings, ours: dict) -> None:
    """pymdp's own loop (its beliefs, its policy inference, its actions as the next prior's) on the observations
    our loop saw picks our actions at every step."""
    from lab import pymdp_oracle

    steps = len(ours["action"])
    observations = [[np.eye(m, dtype=np.float32)[lv] for m, lv in zip(model.num_obs, levels)]
                    for levels in ours["levels"]]
    theirs = pymdp_oracle.closed_loop(pymdp_agent(model, settings), model.A, model.B, model.D, model.A_dependencies,
                                      model.B_dependencies, observations, 16, pymdp_keys(model, settings, steps))
    for t in range(steps):
        np.testing.assert_array_equal(ours["action"][t], theirs["action"][t], err_msg=f"step {t}")
        np.testing.assert_allclose(ours["beliefs"][t], np.concatenate([q[t] for q in theirs["qs"]]), rtol=0,
                                   atol=FLOAT32_ATOL, err_msg=f"beliefs, step {t}")
        np.testing.assert_allclose(ours["q_pi"][t], theirs["q_pi"][t], rtol=0, atol=FLOAT32_ATOL)


@pytest.mark.heavy
@pytest.mark.oracle
@pytest.mark.numba
@pytest.mark.parametrize("selection", ["deterministic", "stochastic"])
def test_a_generated_models_closed_loop_picks_pymdps_actions(selection):
    """A model with dependencies, publish_controls: each tick's chosen control is the next tick's, and the loop
    picks pymdp's actions with pymdp's beliefs; ~/reset restarts the seed's stream (the same run again)."""
    model = dependent_model(seed=4)  # its deterministic loop changes its mind (seeds 0-3 and 5 repeat one action)
    settings = PolicySettings(selection=selection, alpha=1.0, seed=11, publish_controls=True)
    loop = policy_loop(model, settings)
    ours = run_closed_loop(loop, model, env_seed=2, steps=12)
    check_closed_loop_against_pymdp(model, settings, ours)
    assert len({tuple(a) for a in ours["action"]}) > 1, "a run worth comparing: the loop acts"
    loop.reset()  # the node's ~/reset: beliefs to D, the stream from its start
    again = run_closed_loop(loop, model, env_seed=2, steps=12)
    np.testing.assert_array_equal(again["action"], ours["action"])


@pytest.mark.heavy
@pytest.mark.oracle
@pytest.mark.numba
def test_the_default_models_closed_loop_picks_pymdps_actions(repo_root):
    """The default model with C, publish_controls, stochastic: the robot's chosen moves are pymdp's. The last choice
    (stamped at its tick, 15 s) is the next step's control; a Controls message stamped before the tick does not
    change that, one stamped after it does."""
    settings = NodeSettings.from_values(default_values(repo_root, selection="stochastic", alpha=4.0, seed=3,
                                                       publish_controls=True)).policy
    model = default_model(repo_root).with_dtype(np.float32)
    loop = policy_loop(model, settings)
    ours = run_closed_loop(loop, model, env_seed=0, steps=15)
    check_closed_loop_against_pymdp(model, settings, ours)
    assert len({int(a[0]) for a in ours["action"]}) == 3, "a run worth comparing: every move is taken"
    chosen = ours["action"][-1].tolist()
    other = [(chosen[0] + 1) % 3, 0, 0]
    assert loop.controls[0].at(16 * S).tolist() == chosen
    assert loop.add_control(0, other, [], 14, S // 2, 16 * S) is None  # stamped 14.5 s, before the tick
    assert loop.controls[0].at(16 * S).tolist() == chosen
    assert loop.add_control(0, other, [], 15, S // 2, 16 * S) is None  # stamped 15.5 s, after it
    assert loop.controls[0].at(16 * S).tolist() == other


@pytest.mark.heavy
@pytest.mark.oracle
@pytest.mark.numba
def test_agents_share_one_call_and_each_gets_pymdps_choice(repo_root):
    """Two agents, stochastic: one policy call per tick for both (one timing); agent k's action is row k of pymdp's
    batch of two with the rollout keys of policy.seed; an agent that does not step gets no policy step."""
    from lab import pymdp_oracle

    settings = PolicySettings(selection="stochastic", alpha=2.0, seed=1, len=1)
    model = default_model(repo_root).with_dtype(np.float32)
    loop = policy_loop(model, settings, agents=("a", "b"))
    agent = pymdp_agent(model, settings, batch_size=2)
    keys = pymdp_keys(model, settings, 6, agents=2)
    rng = np.random.default_rng(0)
    for t in range(6):
        stamp = (t + 1) * S
        stepping = [0, 1] if t != 3 else [1]
        for k in stepping:
            observe_all(loop, k, random_levels(model, rng), stamp)
        outs = dict(loop.step(stamp, stepping))
        assert sorted(outs) == stepping and len({o.policy.seconds for o in outs.values()}) == 1
        beliefs = np.stack([np.asarray(loop.filter.last_beliefs(k), np.float32) for k in (0, 1)])
        split = np.split(beliefs, np.cumsum(model.num_states)[:-1], axis=1)
        q_pi, _ = pymdp_oracle.infer_policies(agent, split)
        want = pymdp_oracle.sample_action(agent, q_pi, keys[t])
        for k, out in outs.items():
            np.testing.assert_allclose(out.policy.q_pi, q_pi[k], rtol=0, atol=FLOAT32_ATOL)
            np.testing.assert_array_equal(out.policy.controls, want[k], err_msg=f"tick {t}, agent {k}")


@pytest.mark.heavy
def test_configure_compiles_every_call_the_policy_step_makes(monkeypatch, repo_root):
    """The JAX policy backend (no numba): configure traces its program and the noise of stochastic selection once;
    ticks trace nothing more."""
    from bayes_infer_ros.autotune import deployment
    from bayes_infer_ros.inference import action_noise

    monkeypatch.setattr(deployment, "numba_available", lambda: False)
    values = default_values(repo_root, selection="stochastic") | {
        "jax_compilation_cache_dir": "", "variant": "baseline", "device": "cpu", "autotune_verify_top_k": 0,
        "evidence": False}
    settings = NodeSettings.from_values(values)
    runtime = AgentRuntime(settings, LOG, lambda: 0, lambda: False, lambda *a: None)
    runtime.configure(settings, 0.05, lambda: True, lambda back: None)
    runtime.activate()
    stage = runtime.loop.policy
    assert stage.inference.backend == "jax" and stage.inference.trace_count == 1
    noise_programs = action_noise._rollout_program.cache_info().currsize
    compiled = [p._cache_size() for p in _rollout_programs(stage)]
    for t in range(3):
        runtime.observe(0, 0, t % 5, [], t + 1, 0, label="")
        runtime.tick()
    assert runtime.loop.stats.ticks == 3 and stage.calls == 3
    assert stage.inference.trace_count == 1
    assert action_noise._rollout_program.cache_info().currsize == noise_programs
    assert [p._cache_size() for p in _rollout_programs(stage)] == compiled
    runtime.cleanup("done")


def _rollout_programs(stage) -> list:
    from bayes_infer_ros.inference import action_noise

    plan = stage.plan
    return [action_noise._rollout_program(plan.noise_sizes, plan.dtype.name, stage.inference.batch_size, 64)]
