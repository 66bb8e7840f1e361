"""configure checks what the model must fit (the sensor adapters) before it builds any engine: a bad adapter fails
at once, naming its parameter, instead of after a build that takes tens of seconds."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from bayes_infer_ros.node import runtime as runtime_module
from bayes_infer_ros.node.runtime import AgentRuntime
from bayes_infer_ros.node.settings import NodeSettings


def test_the_model_is_checked_before_the_engine_is_built(monkeypatch, repo_root):
    settings = NodeSettings(model_file=str(repo_root / "config" / "agent.yaml"), jax_compilation_cache_dir="",
                            variant="baseline", device="cpu", autotune_verify_top_k=0)
    builds, checked = [], []
    monkeypatch.setattr(runtime_module, "deploy_settings", lambda *a, **k: builds.append(a) or pytest.fail("built"))
    log = SimpleNamespace(info=lambda *a: None, warning=lambda *a: None, error=lambda *a: None)
    runtime = AgentRuntime(settings, log, lambda: 0, lambda: False, lambda *a: None)

    def refuse(model):
        checked.append(model.num_modalities)
        raise ValueError("adapters.voltage.bins: edges must be strictly ascending")

    with pytest.raises(ValueError, match="adapters.voltage.bins"):
        runtime.configure(settings, 0.05, lambda: True, lambda back: None, refuse)
    assert checked == [4] and builds == [] and not runtime.configured
