"""docs/your-model.md, run as written: its python blocks are saved under the name on their ``# file:`` line, its
bash blocks run in order in one folder (``text`` blocks are shown, not run). The guide must end with a beliefs
bag recorded from the node's topic and the figure drawn from it."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from ros_harness import REPO_ROOT
from tolerances import ROS_FLOAT32_ATOL

pytestmark = [pytest.mark.ros]

BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)


def doc_blocks() -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer((REPO_ROOT / "docs" / "your-model.md").read_text())]


def test_the_guide_has_runnable_steps():
    kinds = [k for k, _ in doc_blocks()]
    assert kinds.count("python") == 1 and kinds.count("bash") >= 4
    assert all(k in ("python", "bash", "text") for k in kinds), kinds


def test_your_model_guide_runs_from_pymdp_to_beliefs(ros_graph, tmp_path):
    if shutil.which("bayes-infer") is None:
        pytest.fail("bayes-infer is not on PATH: `make setup` and `source install/setup.bash` put it there")
    env = dict(os.environ)
    log = []
    for kind, body in doc_blocks():
        if kind == "python":
            name = re.match(r"# file: (\S+)", body).group(1)
            (tmp_path / name).write_text(body)
        elif kind == "bash":
            out = subprocess.run(["bash", "-e", "-c", body], cwd=tmp_path, env=env, capture_output=True, text=True,
                                 timeout=400)
            log.append(f"$ {body}\n{out.stdout}{out.stderr}")
            assert out.returncode == 0, "\n".join(log)
    text = "\n".join(log)
    assert "door_model.yaml: valid: 2 factors, 2 modalities" in text, text
    assert "0: door  2 states" in text and "A shape (3, 2) depends on ['door']" in text, text
    assert "warmup: configured door_model.yaml" in text, text
    from bayes_infer_ros.bags import read_episode
    from bayes_infer_ros.model import load_model
    from bayes_infer_ros.plot import read_beliefs

    model = load_model(tmp_path / "door_model.yaml")
    assert model.factor_names == ["door", "light"] and model.modality_names == ["door_sensor", "lamp"]
    series = read_beliefs(tmp_path / "door_beliefs")
    episode = read_episode(tmp_path / "door_bag")
    assert series.topic == "/door/beliefs" and len(series.stamps_ns) == 30
    assert sorted(series.stamps_ns.tolist()) == episode.stamps_ns.tolist()  # one tick per simulated step
    for p in series.probabilities:
        np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=ROS_FLOAT32_ATOL)
    assert (tmp_path / "door_beliefs.png").stat().st_size > 10_000
