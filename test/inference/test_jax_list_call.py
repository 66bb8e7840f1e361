"""The JAX engines' list call (pymdp's ``engine(obs, prior[, actions])``): one jitted program, the packed one with its
beliefs split per factor inside it. Slicing the packed result eagerly would cost one JAX dispatch per factor (each
longer than the packed call itself on this CPU)."""
from pathlib import Path

import numpy as np
import pytest
from jax._src.array import ArrayImpl

from bayes_infer_ros.inference import build_inference
from bayes_infer_ros.model import load_model

ROOT = Path(__file__).resolve().parents[2]
T = 3


@pytest.mark.parametrize("algorithm", ["fpi", "vmp"])
@pytest.mark.parametrize("batch", [None, 2], ids=["one", "batched"])
def test_the_list_call_is_the_packed_call_split_inside_one_program(monkeypatch, algorithm, batch):
    model = load_model(ROOT / "config" / "agent.yaml")
    A, B = model.A, model.B
    if batch is not None:  # b copies of the model: a batched engine
        A, B = [np.stack([a] * batch) for a in A], [np.stack([b] * batch) for b in B]
    engine = build_inference(algorithm, A, model.A_dependencies, B, model.B_dependencies, variant="baseline",
                             num_iter=4)
    assert engine.batch_size == batch
    rng = np.random.default_rng(0)
    lead = (() if batch is None else (batch,)) + ((T,) if algorithm == "vmp" else ())
    obs = [np.eye(m, dtype=np.float32)[rng.integers(m, size=lead)] for m in model.num_obs]
    prior = [np.full((() if batch is None else (batch,)) + (n,), 1.0 / n, np.float32) for n in model.num_states]
    actions = None if algorithm == "fpi" else np.zeros(lead[:-1] + (T - 1, len(prior)), np.int32)
    want = np.asarray(engine.run_packed(np.concatenate(obs, axis=-1), np.concatenate(prior, axis=-1), actions))
    engine(obs, prior, actions)  # traced and compiled once
    traces = engine.trace_count
    sliced = []
    original = ArrayImpl.__getitem__
    monkeypatch.setattr(ArrayImpl, "__getitem__", lambda self, key: sliced.append(key) or original(self, key))
    beliefs = engine(obs, prior, actions)
    monkeypatch.undo()
    assert sliced == []  # no eager slice of the result
    assert engine.trace_count == traces
    assert [b.shape for b in beliefs] == [lead + (n,) for n in model.num_states]
    np.testing.assert_array_equal(np.concatenate([np.asarray(b) for b in beliefs], axis=-1), want)
