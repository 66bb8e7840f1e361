"""configure checks what the model must fit (the sensor adapters) before it builds any engine: a bad adapter fails
at once, naming its parameter, instead of after a build that takes tens of seconds."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from bayes_infer_ros.node import engine_host
from bayes_infer_ros.node.engine_host import EngineHost


def test_the_model_is_checked_before_the_engine_is_built(monkeypatch, repo_root, tmp_path):
    params = {"model_file": str(repo_root / "config" / "agent.yaml"), "jax_compilation_cache_dir": "",
              "jax_compilation_cache_max_mb": 1024, "memory_budget_mb": 2048.0, "algorithm": "fpi",
              "variant": "baseline", "num_iter": 16, "tau": 1.0, "horizon": 5, "device": "cpu",
              "autotune_verify_top_k": 0}
    builds, checked = [], []
    monkeypatch.setattr(engine_host, "build_slot", lambda *a, **k: builds.append(a) or pytest.fail("built"))
    log = SimpleNamespace(info=lambda *a: None, warning=lambda *a: None, error=lambda *a: None)
    host = EngineHost(params.__getitem__, dict, log, lambda *a: None, lambda: False)

    def refuse(model):
        checked.append(model.num_modalities)
        raise ValueError("adapters.voltage.bins: edges must be strictly ascending")

    with pytest.raises(ValueError, match="adapters.voltage.bins"):
        host.configure(0.05, lambda: True, refuse)
    assert checked == [4] and builds == []
