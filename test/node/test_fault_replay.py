"""The fault bag (``bayes-infer make-bag --fault``) replayed through the node's tick loop, without ROS, with the
default model's surprise settings (config/agent_surprise.yaml): the warning names each faulty modality within
``surprise_warn_ticks`` readings of its fault, nothing warns before the first fault, the gates refuse faulty readings
as outliers (counted as refused inputs of their modality), and the posterior-mode accuracy over the faulty stretch
beats the ungated run's."""
from pathlib import Path

import numpy as np
import pytest

from bayes_infer_ros.bags import read_episode
from bayes_infer_ros.bags.faults import DEFAULT_FAULTS, fault_mask
from bayes_infer_ros.bags.golden import posterior_mode_accuracy
from bayes_infer_ros.bags.make_bag import make_sample_bag
from bayes_infer_ros.inference import engine_for_model
from bayes_infer_ros.model import load_model
from bayes_infer_ros.model.io import read_parameters_yaml
from bayes_infer_ros.node.surprise import GATE_PREFIX, settings_from_parameters
from bayes_infer_ros.node.tick_loop import TickLoop

REPO_ROOT = Path(__file__).resolve().parents[2]

VARIANTS = ["baseline", pytest.param("fused_numba", marks=pytest.mark.numba)]


@pytest.fixture(scope="module")
def fault_bag(tmp_path_factory):
    path = tmp_path_factory.mktemp("fault") / "agent_fault"
    make_sample_bag(path, REPO_ROOT / "config" / "agent.yaml", faults=DEFAULT_FAULTS)
    return read_episode(path)


@pytest.fixture(scope="module")
def model():
    return load_model(REPO_ROOT / "config" / "agent.yaml").with_dtype(np.float32)


def surprise_parameters(gated: bool) -> dict:
    values = read_parameters_yaml(REPO_ROOT / "config" / "agent_surprise.yaml")
    return {k: v for k, v in values.items() if gated or not k.startswith(GATE_PREFIX)}


def replay(model, episode, values: dict, variant: str):
    """Every step of ``episode`` admitted and ticked as the node does (its controls half a step before the next
    step's observations): (beliefs (T, S), each step's TickOutput, the tick loop)."""
    names = [model.modality_name(i) for i in range(model.num_modalities)]
    settings = settings_from_parameters(values, names, values["surprise_warn_ticks"], 100)
    loop = TickLoop(model, engine_for_model(model, "fpi", variant=variant), 5, (), settings)
    inputs = loop.agent_inputs[0]
    half = int(episode.stamps_ns[1] - episode.stamps_ns[0]) // 2
    outs, warnings = [], []
    for t, ns in enumerate(int(x) for x in episode.stamps_ns):
        if t > 0:
            assert loop.add_control(0, episode.actions[t - 1], [], (ns - half) // 10**9, (ns - half) % 10**9, ns) is None
        for i in range(model.num_modalities):
            got = inputs.observe(i, int(episode.observations[t, i]), [], ns // 10**9, ns % 10**9, now=float(t),
                                 now_ns=ns, arrival=0.0, timeout_s=0.0, max_future_s=0.5)
            assert got.ok
        (_, out), = loop.step(ns, [0])
        outs.append(out)
        warnings.append({w.name for w in loop.monitors[0].warnings()})
    return np.stack([o.posterior for o in outs]), outs, warnings, loop


def accuracy(beliefs, loop, states, steps) -> float:
    offsets = loop.filter.engine.layout.state_offsets
    qs = [beliefs[:, a:b] for a, b in zip(offsets[:-1], offsets[1:])]
    return float(posterior_mode_accuracy(qs, states, steps).mean())


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_fault_bag_warns_gates_and_keeps_the_beliefs_closer_to_the_truth(model, fault_bag, variant):
    mask = fault_mask(fault_bag.custom_data, fault_bag.num_steps, fault_bag.modality_names)
    onset = {name: int(np.flatnonzero(mask[:, i])[0]) for i, name in enumerate(fault_bag.modality_names)
             if mask[:, i].any()}
    results = {}
    for gated in (False, True):
        values = surprise_parameters(gated)
        beliefs, outs, warnings, loop = replay(model, fault_bag, values, variant)
        N = values["surprise_warn_ticks"]
        first = {}
        for t, names in enumerate(warnings):
            for name in names:
                first.setdefault(name, t)
        # nothing warns on the clean stretch before the first fault; the stuck lidar and the garbled battery driver's
        # charging reading warn within N readings of their fault's start (the voltage reading's garbage is mostly
        # plausible: it warns later, in its stretch, or not at all)
        assert min(first.values()) >= min(onset.values()), first
        for name in ("lidar_gap", "charging"):
            assert onset[name] <= first[name] < onset[name] + N, (gated, name, first)
        if "voltage" in first:
            assert mask[first["voltage"], fault_bag.modality_names.index("voltage")]
        outliers = np.stack([o.evidence.outliers for o in outs])
        results[gated] = (accuracy(beliefs, loop, fault_bag.states, mask.any(axis=1)), outliers, loop)
    (ungated_acc, ungated_outliers, _), (gated_acc, outliers, loop) = results[False], results[True]
    assert not ungated_outliers.any()
    # the gates refuse faulty readings as outliers, more often than clean ones, and count each as a refused input
    assert outliers[mask].mean() > 2 * outliers[~mask].mean() > 0
    for i, mod in enumerate(loop.agent_inputs[0].modalities):
        assert mod.rejected.get("outlier", 0) == outliers[:, i].sum()
    assert outliers[:, fault_bag.modality_names.index("rfid_tag")].sum() == 0  # no gate on it
    assert gated_acc > ungated_acc, (gated_acc, ungated_acc)


def test_evidence_in_the_tick_output_is_the_filters(model, fault_bag):
    values = surprise_parameters(True)
    _, outs, _, loop = replay(model, fault_bag, values, "baseline")
    last = loop.filter.evidence(0)
    assert outs[-1].evidence.free_energy == pytest.approx(float(last.free_energy.total))
    np.testing.assert_array_equal(outs[-1].evidence.surprise, last.surprise)
    reports = [r for o in outs for r in o.evidence.reports]
    assert reports and all(r.counters == ("rejected.outlier",) for r in reports)
    assert "dropped (outlier): surprise" in reports[0].warnings[0][1] and "surprise_gate." in reports[0].warnings[0][1]
    loop.reset()
    assert loop.monitors[0].modality(1).readings == 0 and loop.filter.evidence(0) is None
