"""``benchmarks/call_floor.py``: every layer of the list call it times computes the list call's beliefs, and each
candidate runs."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from bayes_infer_ros.model import load_model
from lab.bench_check import DEFAULT_MODEL

pytestmark = pytest.mark.numba
SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "call_floor.py"


def _script():
    spec = importlib.util.spec_from_file_location("call_floor", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return module


def test_every_layer_gives_the_list_calls_beliefs_and_every_candidate_runs():
    model = load_model(DEFAULT_MODEL)
    calls = _script().candidates(model)  # it compares gather_views and the closure with engine(obs, prior)
    assert set(calls) == {"bare", "gather", "gather_views", "closure", "list", "noop_instance_call", "views"}
    beliefs = calls["list"]()
    assert [b.shape for b in beliefs] == [(n,) for n in model.num_states]
    np.testing.assert_allclose([b.sum() for b in beliefs], 1.0, rtol=1e-5)
    assert calls["noop_instance_call"]() is None
    assert len(calls["views"]()) == model.num_factors
