"""``bayes-infer warmup`` configures as the node does: a params file's ``agents`` reach the build (a fleet's batch,
whose many-agent kernels then compile before the node's first start)."""
import pytest

from bayes_infer_ros.node import warmup
from bayes_infer_ros.node.engine_host import EngineHost


class Built(Exception):
    """load_and_build was reached: the test has what it asked."""


@pytest.mark.parametrize("agents", [[], ["robot1", "robot2", "robot3"]])
def test_warmup_builds_for_the_params_files_agents(monkeypatch, tmp_path, agents):
    seen = []

    def load_and_build(self, *args, **kwargs):
        seen.append(list(self.agents))
        raise Built

    monkeypatch.setattr(EngineHost, "load_and_build", load_and_build)
    params = tmp_path / "params.yaml"
    params.write_text("/**:\n  ros__parameters:\n    agents: [" + ", ".join(agents) + "]\n")
    with pytest.raises(Built):
        warmup.warm(params)
    assert seen == [agents]
