"""Policy inference's build-time plan and per-call contract (``inference/policy.py``, ``inference/native/policy.py``):
pymdp's policy enumeration, the tree of shared prefixes against a brute force, the kernel's packed arguments, the
JAX program traced once, and the errors that name what was wrong."""
from __future__ import annotations

import inspect
import itertools
import re

import numpy as np
import pytest

from bayes_infer_ros.inference.policy import (POLICY_PARAMETERS, build_policy_inference, construct_policies,
                                              plan_policies, policy_inference_for_model, policy_seed, policy_settings,
                                              policy_tree)
from bayes_infer_ros.model import GenerativeModel, ModelValidationError
from oracle import random_case

NUMBA = pytest.param("fused_numba", marks=pytest.mark.numba)
BACKENDS = [NUMBA, "jax"]


def small_model(seed: int = 0, num_controls=(3, 1, 2)):
    case = random_case(seed, (3, 2, 2), [[0], [1, 2], [0, 2]], (3, 2, 2), B_deps=[[0], [1, 0], [2]],
                       num_controls=num_controls, T=2)
    return case.A, case.A_deps, case.B, case.B_deps, case.prior


@pytest.mark.oracle
@pytest.mark.parametrize("num_controls,policy_len", [((3,), 1), ((2, 1, 3), 2), ((1, 1), 3), ((2, 2, 2), 3)])
def test_construct_policies_is_pymdps(num_controls, policy_len):
    from pymdp import control  # optional: the oracle

    want = np.asarray(control.construct_policies([4] * len(num_controls), list(num_controls), policy_len))
    np.testing.assert_array_equal(construct_policies(num_controls, policy_len), want)


def test_too_many_policies_names_policy_len():
    with pytest.raises(ModelValidationError, match=r"^policy_len: .*more than the limit"):
        construct_policies((10, 10, 10), 3)
    with pytest.raises(ModelValidationError, match="policy_len: expected an integer >= 1"):
        construct_policies((2,), 0)


def _prefixes_by_walk(tree, P: int) -> list[tuple]:
    """Each policy's actions read back from the tree: its leaf, then each node's parent (the last node before it one
    level up, in the nodes' pre-order)."""
    parent = np.full(tree.num_nodes, -1)
    last = {}
    for i, t in enumerate(tree.level):
        parent[i] = last.get(t - 1, -1) if t > 0 else -1
        last[t] = i
    leaves = np.flatnonzero(tree.leaf >= 0)
    out = []
    for p in range(P):
        node = leaves[np.flatnonzero(tree.leaf[leaves] == tree.policy_leaf[p])[0]]
        steps = []
        while node >= 0:
            steps.append(tuple(tree.action[node]))
            node = parent[node]
        out.append(tuple(reversed(steps)))
    return out


@pytest.mark.parametrize("order", ["enumerated", "shuffled_with_repeats"])
@pytest.mark.parametrize("num_controls,policy_len", [((3,), 1), ((2, 1, 3), 2), ((2, 2), 3), ((1,), 2)])
def test_policy_tree_against_brute_force(num_controls, policy_len, order):
    policies = construct_policies(num_controls, policy_len)
    if order != "enumerated":
        rng = np.random.default_rng(1)
        pick = rng.permutation(len(policies))[:max(1, len(policies) // 2)]
        policies = policies[np.concatenate([pick, pick[:1]])]
    tree = policy_tree(policies)
    P, T, _ = policies.shape
    prefixes = {tuple(map(tuple, policies[p, :t + 1])) for p in range(P) for t in range(T)}
    assert tree.num_nodes == len(prefixes)  # every distinct prefix once
    assert _prefixes_by_walk(tree, P) == [tuple(map(tuple, p)) for p in policies]
    for t in range(T):  # the per-level view the JAX path reads
        nodes = tree.level_nodes[t]
        assert (tree.level[nodes] == t).all()
        if t:
            parents = tree.level_nodes[t - 1][tree.level_parent[t]]
            assert (tree.level[parents] == t - 1).all() and (parents < nodes).all()
    for nodes in tree.level_nodes:  # kept: the previous node at the level is a sibling with the same control
        assert not tree.kept[nodes[0]].any()
        for prev, node in zip(nodes[:-1], nodes[1:]):
            sibling = np.array_equal(policies_prefix(tree, prev)[:-1], policies_prefix(tree, node)[:-1])
            np.testing.assert_array_equal(tree.kept[node], sibling & (tree.action[node] == tree.action[prev]))


def policies_prefix(tree, node: int) -> list:
    """The actions from the root to ``node``."""
    steps = [tuple(tree.action[node])]
    t = tree.level[node]
    for i in range(node - 1, -1, -1):
        if tree.level[i] == t - 1:
            steps.append(tuple(tree.action[i]))
            t -= 1
    return list(reversed(steps))


@pytest.mark.numba
def test_kernel_takes_its_schemas_order_and_the_packing_reads_back():
    from bayes_infer_ros.inference.native import policy as native  # optional: numba

    assert tuple(inspect.signature(native.policy_rows.py_func).parameters) == native.PolicyArgs._fields
    section = native.__doc__.split("-------------------------------------------------------------\n", 1)[1]
    assert tuple(re.findall(r"^(\w+) : ", section, flags=re.MULTILINE)) == native.PolicyArgs._fields  # documented
    bullets = [line for line in section.splitlines() if line.startswith("    - ")]  # the packed arrays, each once
    named = {n for line in bullets for n in re.findall(r"(\w+) \(", line)}
    assert set(native.INT_FIELDS + native.FLOAT_FIELDS) <= named, set(native.INT_FIELDS + native.FLOAT_FIELDS) - named
    rng = np.random.default_rng(0)
    ints_in = [rng.integers(-3, 9, size=s) for s in [(4,), (2, 3), (1,)]]
    floats_in = [rng.random(s).astype(np.float32) for s in [(1, 5), (3, 2)]]
    ints, floats = native.pack_plan(ints_in, floats_in, np.float32)
    w = native.HEADER_WIDTH
    for j, a in enumerate(ints_in + floats_in):
        offset, rows, cols = ints[w * j:w * j + w]
        source = ints if j < len(ints_in) else floats
        np.testing.assert_array_equal(source[offset:offset + rows * cols].reshape(a.shape), a)
    assert len(native.INT_FIELDS) + len(native.FLOAT_FIELDS) == native.LOG_E_SLOT + 1


def test_jax_program_traces_once():
    A, A_deps, B, B_deps, prior = small_model()
    policy = build_policy_inference(A, A_deps, B, B_deps, policy_len=2, backend="jax", selection="stochastic")
    rng = np.random.default_rng(0)
    for k in range(3):
        qs = [rng.dirichlet(np.ones(len(q))).astype(np.float32) for q in prior]
        policy(qs, rng.gumbel(size=policy.plan.noise_size))
    assert policy.trace_count == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_call_errors_name_the_argument(backend):
    A, A_deps, B, B_deps, prior = small_model()
    policy = build_policy_inference(A, A_deps, B, B_deps, backend=backend)
    with pytest.raises(ValueError, match=r"qs: expected packed beliefs of shape \(7,\)"):
        policy(np.ones(6, np.float32))
    stochastic = build_policy_inference(A, A_deps, B, B_deps, backend=backend, selection="stochastic")
    with pytest.raises(ValueError, match="noise: stochastic selection needs"):
        stochastic(prior)
    with pytest.raises(ValueError, match=r"noise: expected shape \(6,\)"):
        stochastic(prior, np.zeros(5))
    # list or packed beliefs, any float dtype: the same result
    packed = np.concatenate(prior).astype(np.float64)
    np.testing.assert_array_equal(policy(packed).neg_efe, policy(prior).neg_efe)


def test_build_errors_name_the_setting():
    A, A_deps, B, B_deps, _ = small_model()
    cases = [
        (dict(terms=("utility", "param_info_gain")), "terms: 'param_info_gain' .* needs Dirichlet parameters"),
        (dict(terms=("novelty",)), "terms: expected distinct names"),
        (dict(selection="greedy"), "selection: expected one of"),
        (dict(sampling_mode="joint"), "sampling_mode: expected one of"),
        (dict(gamma=float("nan")), "gamma: expected a finite number"),
        (dict(E=np.ones(5)), r"E: shape \(5,\), expected \(6,\)"),
        (dict(C=[np.zeros(3), np.zeros(2), np.zeros(3)]), r"C\[2\]: shape \(3,\), expected \(2,\)"),
        (dict(policies=np.zeros((2, 1, 2), int)), r"policies: expected shape \(num_policies >= 1, policy_len >= 1, 3"),
        (dict(policies=np.array([[[0, 0, 2]]])), r"policies\[0\]\[0\]\[2\]: control 2 out of range"),
        (dict(dtype=np.float16), "dtype: expected float32 or float64"),
        (dict(A_dependencies=[[0], [1, 2], []]), r"A_dependencies\[2\]: dependency list is empty"),
        (dict(B_dependencies=[[0], [1, 3], [2]]), r"B_dependencies\[1\]: factor index 3 out of range"),
        (dict(B=[B[0], B[1] * 2, B[2]]), r"B\[1\]: distributions along axis 0 must sum to 1"),
    ]
    for kwargs, message in cases:
        arrays = dict(A=A, A_dependencies=A_deps, B=B, B_dependencies=B_deps)
        arrays.update({k: kwargs.pop(k) for k in list(kwargs) if k in arrays})
        with pytest.raises(ValueError, match=message):
            plan_policies(**arrays, **kwargs)
    with pytest.raises(ValueError, match="B: policy inference needs the model's transitions"):
        plan_policies(A, A_deps, None, B_deps)


def test_defaults_are_pymdps_agent():
    """C_m = 1 / m_m, E uniform, gamma and alpha 1, both terms, deterministic full selection."""
    A, A_deps, B, B_deps, _ = small_model()
    plan = plan_policies(A, A_deps, B, B_deps)
    assert plan.gamma == 1.0 and plan.alpha == 1.0 and plan.use_utility and plan.use_states_info_gain
    assert (plan.selection, plan.sampling_mode) == ("deterministic", "full")
    for c, a in zip(plan.C, A):
        np.testing.assert_allclose(c, np.full((1, a.shape[0]), 1.0 / a.shape[0]), rtol=1e-7)
    np.testing.assert_allclose(plan.log_E, np.log(np.full(6, 1.0 / 6)), rtol=1e-6)
    assert policy_settings({}) == dict(gamma=1.0, alpha=1.0, terms=("utility", "states_info_gain"),
                                       selection="deterministic", sampling_mode="full")
    assert {k: v.default for k, v in POLICY_PARAMETERS.items()}["policy.len"] == 1


def test_parameters_are_refused_with_their_key():
    assert policy_settings({"policy.gamma": 4, "policy.terms": ["utility"], "policy.selection": "stochastic"}) == \
        dict(gamma=4.0, alpha=1.0, terms=("utility",), selection="stochastic", sampling_mode="full")
    for params, message in [({"policy.gamma": "high"}, "policy.gamma: expected a finite number"),
                            ({"policy.alpha": True}, "policy.alpha: expected a finite number"),
                            ({"policy.terms": "utility"}, "policy.terms: expected a list"),
                            ({"policy.terms": ["param_info_gain"]}, "policy.terms: 'param_info_gain'"),
                            ({"policy.selection": "greedy"}, "policy.selection: expected one of"),
                            ({"policy.sampling_mode": "joint"}, "policy.sampling_mode: expected one of")]:
        with pytest.raises(ValueError, match=message):
            policy_settings(params)
    assert policy_seed({"policy.seed": 2**32 - 1}) == 2**32 - 1
    with pytest.raises(ValueError, match=r"policy.seed: expected an integer in \[0, 4294967295\]"):
        policy_seed({"policy.seed": -1})


@pytest.mark.parametrize("backend", BACKENDS)
def test_from_a_model_with_its_C_E_and_policies(backend):
    """``policy_inference_for_model`` reads the model's C, E and policies (a given list of two steps)."""
    A, A_deps, B, B_deps, prior = small_model()
    policies = construct_policies([b.shape[-1] for b in B], 2)[::5]
    rng = np.random.default_rng(2)
    C = [rng.normal(size=a.shape[0]) for a in A]
    E = rng.dirichlet(np.ones(len(policies)))
    model = GenerativeModel(A=A, A_dependencies=A_deps, B=B, B_dependencies=B_deps, C=C, E=E, policies=policies)
    model.validate()
    got = policy_inference_for_model(model, backend=backend, gamma=3.0)(prior)
    want = build_policy_inference(A, A_deps, B, B_deps, C, E, policies=policies, gamma=3.0, backend=backend)(prior)
    np.testing.assert_array_equal(got.q_pi, want.q_pi)
    assert got.neg_efe.shape == (len(policies),)


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_policy(backend):
    """No control drives any factor: one policy, q_pi = 1, the controls all 0."""
    A, A_deps, B, B_deps, prior = small_model(num_controls=(1, 1, 1))
    got = build_policy_inference(A, A_deps, B, B_deps, policy_len=3, backend=backend)(prior)
    assert got.q_pi.tolist() == [1.0] and got.action.tolist() == [0, 0, 0] and got.policy == 0


def test_every_node_of_a_product_is_a_prefix():
    """A product of u controls over T steps has sum_t u^t nodes (shared prefixes computed once)."""
    for u, T in itertools.product((1, 2, 3), (1, 2, 3)):
        assert policy_tree(construct_policies((u,), T)).num_nodes == sum(u ** t for t in range(1, T + 1))
