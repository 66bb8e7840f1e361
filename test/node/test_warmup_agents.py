"""``bayes-infer warmup`` configures as the node does: a params file's ``agents`` reach the deployment (a fleet's
batch, whose many-agent kernels then compile before the node's first start)."""
import pytest

from bayes_infer_ros.node import runtime as runtime_module
from bayes_infer_ros.node import warmup


class Built(Exception):
    """The deployment was reached: the test has what it asked."""


@pytest.mark.parametrize("agents", [[], ["robot1", "robot2", "robot3"]])
def test_warmup_deploys_for_the_params_files_agents(monkeypatch, tmp_path, agents):
    seen = []

    def deploy(model, settings, *args, **kwargs):
        seen.append((list(settings.agents), settings.engine.agents))
        raise Built

    monkeypatch.setattr(runtime_module, "deploy_settings", deploy)
    params = tmp_path / "params.yaml"
    params.write_text("/**:\n  ros__parameters:\n    model_file: config/agent.yaml\n    jax_compilation_cache_dir: ''\n"
                      "    agents: [" + ", ".join(agents) + "]\n")
    with pytest.raises(RuntimeError, match="engine build"):  # configure names the step that failed
        warmup.warm(params)
    assert seen == [(agents, max(len(agents), 1))]
