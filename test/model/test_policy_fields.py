"""The model's policy fields (C, E, policy_len, policies): validation naming the field, the params YAML
(``model.C.<modality>``, ``model.E``, ``policy.len``, ``policy.policies``) and npz round trips, models without them
loading as before, and ``bayes-infer model from-pymdp`` carrying them (and the policy settings) from a pymdp agent."""
from __future__ import annotations

import json

import numpy as np
import pytest

from bayes_infer_ros.cli.model import main as model_main
from bayes_infer_ros.model import GenerativeModel, ModelValidationError, load_model, model_to_parameters, save_model
from bayes_infer_ros.model.io import model_from_parameters, read_parameters_yaml
from bayes_infer_ros.model.policies import construct_policies
from bayes_infer_ros.model.pymdp_format import pymdp_agent_arrays, read_pymdp_file

from tolerances import FLOAT64_ATOL


def model_with_policies(**fields) -> GenerativeModel:
    """Two factors (3 controls, 1), three modalities; C, E and the policies as given."""
    A = [np.full((2, 3), 0.5), np.full((3, 3, 2), 1 / 3), np.array([[0.9, 0.2], [0.1, 0.8]])]
    B0 = np.stack([np.eye(3), np.roll(np.eye(3), 1, axis=0), np.roll(np.eye(3), -1, axis=0)], axis=-1)
    B1 = np.full((2, 2, 3, 1), 0.5)
    return GenerativeModel(A=A, A_dependencies=[[0], [0, 1], [1]], B=[B0, B1], B_dependencies=[[0], [1, 0]],
                           factor_names=["pos", "lamp"], modality_names=["gps", "cam", "light"], **fields)


def test_models_without_policy_fields_load_as_before(repo_root, tmp_path):
    model = load_model(repo_root / "config" / "agent.yaml")
    assert model.C is None and model.E is None and model.policy_len is None and model.policies is None
    assert not model.has_policy_prior and model.horizon == 1 and model.num_policies == 3
    assert not any(k.startswith(("model.C", "model.E", "policy.")) for k in model_to_parameters(model))
    save_model(model, tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz") as z:
        assert not {"C_0", "E", "policies"} & set(z.files)
    assert load_model(tmp_path / "m.npz").C is None


@pytest.mark.parametrize("suffix", [".yaml", ".npz"])
def test_round_trip(tmp_path, suffix):
    rng = np.random.default_rng(0)
    policies = construct_policies((3, 1), 2)[[0, 4, 8, 1]]
    model = model_with_policies(C=[rng.normal(size=n) for n in (2, 3, 2)], E=rng.dirichlet(np.ones(4)),
                                policy_len=2, policies=policies).validate()
    save_model(model, tmp_path / f"m{suffix}")
    back = load_model(tmp_path / f"m{suffix}")
    for got, want in zip(back.C, model.C):
        np.testing.assert_allclose(got, want, atol=FLOAT64_ATOL)
    np.testing.assert_allclose(back.E, model.E, atol=FLOAT64_ATOL)
    np.testing.assert_array_equal(back.policies, policies)
    assert back.policy_len == 2 and back.num_policies == 4


def test_params_layout(tmp_path):
    model = model_with_policies(C=[np.zeros(2), np.arange(3.0), np.ones(2)], E=np.full(9, 1 / 9), policy_len=2)
    flat = model_to_parameters(model.validate())
    assert flat["model.C.cam"] == [0.0, 1.0, 2.0] and len(flat["model.E"]) == 9 and flat["policy.len"] == 2
    assert "policy.policies" not in flat  # every combination: the default, not written
    save_model(model, tmp_path / "m.yaml")
    written = read_parameters_yaml(tmp_path / "m.yaml")  # nested as ROS reads it: model: C: gps, policy: len
    assert written["policy.len"] == 2 and written["model.C.gps"] == [0.0, 0.0]


@pytest.mark.parametrize("fields,field,fragment", [
    (dict(C=[np.zeros(2), np.zeros(3)]), "C", "expected one preference vector per modality (3), got 2"),
    (dict(C=[np.zeros(2), np.zeros(2), np.zeros(2)]), "C[1] (cam)", "shape (2,), expected (3,)"),
    (dict(C=[np.zeros(2), np.array([0, np.inf, 0]), np.zeros(2)]), "C[1] (cam)",
     "non-finite preference inf at index 1"),
    (dict(E=np.ones(4)), "E", "shape (4,), expected (3,): one prior probability per policy"),
    (dict(E=np.ones(9), policy_len=2), "E", "shape (9,)"),  # valid: 3 ** 2 policies
    (dict(E=-np.ones(3)), "E", "negative entry"),
    (dict(policy_len=0), "policy_len", "expected an integer >= 1"),
    (dict(policy_len=13), "policy_len", "more than the limit"),
    (dict(policies=np.array([[[0, 1]]])), "policies[0][0][1]", "control 1 out of range: factor 1 has 1 control(s)"),
    (dict(policies=np.zeros((2, 3, 2), int), policy_len=2), "policies", "3 steps per policy but policy_len is 2"),
    (dict(policies=np.zeros((2, 1), int)), "policies",
     "expected shape (num_policies >= 1, policy_len >= 1, 2 factors)"),
])
def test_validation_names_the_field(fields, field, fragment):
    model = model_with_policies(**fields)
    if fragment == "shape (9,)":
        model.validate()
        return
    with pytest.raises(ModelValidationError) as err:
        model.validate()
    assert err.value.field == field and fragment in str(err.value), str(err.value)


def test_an_empty_policy_list_means_every_combination():
    flat = {**model_to_parameters(model_with_policies()), "policy.policies": [], "policy.len": 2}
    model = model_from_parameters(flat)
    assert model.policies is None and model.num_policies == 9


def test_E_and_policies_need_B():
    model = GenerativeModel(A=[np.full((2, 3), 0.5)], A_dependencies=[[0]], E=np.ones(1))
    with pytest.raises(ModelValidationError, match="^E: policies need the model's transitions"):
        model.validate()
    GenerativeModel(A=[np.full((2, 3), 0.5)], A_dependencies=[[0]], C=[np.zeros(2)]).validate()  # C alone is fine


@pytest.mark.parametrize("change,key,fragment", [
    ({"model.C.gps": [0.0, 1.0]}, "model.C.cam", "missing: give every modality's preferences"),
    ({"model.C.gps": "high", "model.C.cam": [0.0] * 3, "model.C.light": [0.0] * 2}, "model.C.gps", "list of numbers"),
    ({"policy.len": -1}, "policy.len", "expected an integer >= 1"),
    ({"policy.len": 2, "policy.policies": [0, 0, 1]}, "policy.policies", "expected a multiple of policy.len x factors"),
    ({"policy.policies": "0 1"}, "policy.policies", "expected a list of integers"),
    ({"model.E": [0.5, 0.5]}, "E", "shape (2,), expected (3,)"),
])
def test_params_are_refused_naming_the_key(change, key, fragment):
    flat = {**model_to_parameters(model_with_policies()), **change}
    with pytest.raises(ModelValidationError) as err:
        model_from_parameters(flat)
    assert err.value.field == key and fragment in str(err.value), str(err.value)


def test_policy_len_0_is_not_given():
    """``policy.len: 0`` (the node parameter's default, config/agent.yaml) leaves the model's own steps: those of
    its policies, else 1."""
    flat = {**model_to_parameters(model_with_policies()), "policy.len": 0}
    model = model_from_parameters(flat)
    assert model.policy_len is None and model.horizon == model_with_policies().horizon


@pytest.mark.oracle
def test_from_pymdp_agent(tmp_path, capsys):
    """A pymdp Agent exported with pymdp_agent_arrays: C, E, the policies and the settings come through."""
    import jax.numpy as jnp
    from pymdp.agent import Agent  # optional: the oracle

    model = model_with_policies()
    rng = np.random.default_rng(1)
    C = [rng.normal(size=n).astype(np.float32) for n in (2, 3, 2)]
    E = rng.dirichlet(np.ones(9)).astype(np.float32)

    def agent(**settings):
        return Agent(A=[jnp.asarray(a, jnp.float32) for a in model.A], B=[jnp.asarray(b, jnp.float32) for b in model.B],
                     C=[jnp.asarray(c) for c in C], A_dependencies=[list(d) for d in model.A_dependencies],
                     B_dependencies=[list(d) for d in model.B_dependencies], policy_len=2, **settings)

    np.savez(tmp_path / "agent.npz", **pymdp_agent_arrays(agent(E=jnp.asarray(E), gamma=3.0, alpha=2.0,
                                                                 use_states_info_gain=False,
                                                                 action_selection="stochastic")))
    got, settings = read_pymdp_file(tmp_path / "agent.npz")
    assert settings == {"policy.gamma": 3.0, "policy.alpha": 2.0, "policy.selection": "stochastic",
                        "policy.sampling_mode": "full", "policy.terms": ["utility"]}
    assert got.policy_len == 2 and got.policies is None  # the default list: its length says it all
    np.testing.assert_allclose(got.E, E)
    for c, want in zip(got.C, C):
        np.testing.assert_allclose(c, want)
    # the CLI: into a params file (settings beside the model), then valid as the node reads it
    assert model_main(["from-pymdp", str(tmp_path / "agent.npz"), "-o", str(tmp_path / "m.yaml")]) == 0
    assert "9 policies of 2 step(s)" in capsys.readouterr().out
    flat = read_parameters_yaml(tmp_path / "m.yaml")
    assert flat["policy.gamma"] == 3.0 and flat["policy.terms"] == ["utility"] and flat["policy.len"] == 2
    assert model_main(["validate", str(tmp_path / "m.yaml")]) == 0
    assert "unknown parameter" not in capsys.readouterr().err
    assert model_main(["show", str(tmp_path / "m.yaml")]) == 0
    assert "policies: 9 of 2 step(s) (every combination of the controls); E [" in capsys.readouterr().out
    # a given list is kept; pymdp's parameter information gain is refused with its key
    given = construct_policies((3, 1), 2)[::2]
    np.savez(tmp_path / "given.npz", **pymdp_agent_arrays(agent(policies=given)))
    np.testing.assert_array_equal(read_pymdp_file(tmp_path / "given.npz")[0].policies, given)
    arrays = dict(np.load(tmp_path / "given.npz"))
    arrays["use_param_info_gain"] = np.asarray(True)
    np.savez(tmp_path / "novelty.npz", **arrays)
    with pytest.raises(ModelValidationError, match="^use_param_info_gain: parameter information gain needs Dirichlet"):
        read_pymdp_file(tmp_path / "novelty.npz")


def test_bad_policy_parameters_fail_validate(tmp_path, capsys, repo_root):
    text = (repo_root / "config" / "agent.yaml").read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("      gamma: 1.0 ", "      gamma: high\n      sede: 3\n", 1).replace(
        "selection: deterministic", "selection: greedy", 1))
    capsys.readouterr()
    assert model_main(["validate", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "policy.gamma: expected a finite number in [0, 1e+06], got 'high'" in err
    assert err.count("policy.selection: 'greedy' is not one of ['deterministic', 'stochastic']") == 1, err
    assert "unknown parameter 'policy.sede' ignored (did you mean 'policy.seed'?)" in err


def test_time_indexed_C_is_refused_in_files(tmp_path):
    np.savez(tmp_path / "m.npz", A0=np.eye(2), B0=np.eye(2)[:, :, None], C0=np.zeros((2, 2)),
             A_dependencies=json.dumps([[0]]))
    with pytest.raises(ModelValidationError, match=r"^C0: shape \(2, 2\): .*time-indexed C"):
        read_pymdp_file(tmp_path / "m.npz")


def test_the_policy_limit_applies_only_to_a_model_that_asks_for_policies():
    """Many controllable factors (2 ** 25 combinations) make a valid model for state inference; the limit on the
    number of policies refuses it, naming policy_len, only once it gives policy_len or E."""
    F = 25
    A = [np.full((2, 2), 0.5) for _ in range(F)]
    B = [np.stack([np.eye(2), np.eye(2)[::-1]], axis=-1) for _ in range(F)]
    deps = [[f] for f in range(F)]
    GenerativeModel(A=A, A_dependencies=deps, B=B, B_dependencies=deps).validate()
    with pytest.raises(ModelValidationError, match=r"make 3.36e\+07 policies, more than the limit") as err:
        GenerativeModel(A=A, A_dependencies=deps, B=B, B_dependencies=deps, policy_len=1).validate()
    assert err.value.field == "policy_len"
