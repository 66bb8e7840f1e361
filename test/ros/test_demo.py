"""`make demo`'s program (lab.demo) end to end, the way CI runs it: no TTY, its own processes."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.ros


def test_demo_runs_without_a_tty_and_writes_the_plot(ros_graph, repo_root, tmp_path):
    env = dict(os.environ)
    out = tmp_path / "demo"
    proc = subprocess.run([sys.executable, "-m", "lab.demo", "--rate", "2", "--out-dir", str(out)],
                          env=env, capture_output=True, text=True, timeout=240, cwd=repo_root, stdin=subprocess.DEVNULL)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text
    assert "\r" not in proc.stdout  # no in-place rewriting without a TTY
    live = [line for line in proc.stdout.splitlines() if line.startswith("t=")]
    assert 5 <= len(live) <= 20, text  # a line every 20 ticks, not one per tick
    m = re.search(r"ticks received\s+(\d+) for (\d+) bag steps", proc.stdout)
    # The demo replays at a fixed rate (its default, 2x) without waiting for each step (it is a demo, not a golden
    # test): on a loaded 2-core machine the event-driven node may miss a few steps (seen at 5x: 193/200 with two
    # benchmark processes running). Every-step delivery is asserted by test_replay.py, which waits per step.
    assert m and int(m.group(1)) >= 0.9 * int(m.group(2)), text
    assert re.search(r"end-to-end latency\s+median [\d.]+ ms, p99 [\d.]+ ms", proc.stdout), text
    from bayes_infer_ros.model import load_model

    model = load_model(repo_root / "config" / "agent.yaml")
    accuracies = {name: float(v) / 100 for name, v in re.findall(r"accuracy (\w+)\s+([\d.]+)%", proc.stdout)}
    assert set(accuracies) == set(model.factor_names), text
    for f, name in enumerate(model.factor_names):  # above chance (the replay tests check the exact values)
        assert accuracies[name] > 1.0 / model.num_states[f] + 0.05, text
    png = out / "beliefs.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert (out / "beliefs" / "metadata.yaml").is_file() and (out / "agent_node.log").is_file()


def test_demo_refuses_a_bag_of_another_model(ros_graph, repo_root, tmp_path):
    from bayes_infer_ros.bags import simulate, write_episode_bag
    from lab.demo import main
    from bayes_infer_ros.model import GenerativeModel
    import numpy as np

    other = GenerativeModel(A=[np.eye(2)], A_dependencies=[[0]], B=[np.eye(2)[:, :, None]], modality_names=["x"],
                            factor_names=["y"])
    bag = write_episode_bag(tmp_path / "other", other, simulate(other, 3, seed=0))
    assert main(["--bag", str(bag), "--out-dir", str(tmp_path / "o")]) == 2


def test_fault_demo_warns_naming_the_faulty_sensors_and_gating_helps(ros_graph, repo_root, tmp_path):
    """`python -m lab demo --fault`: the fault bag through the node without and with the surprise gates. In both runs
    /diagnostics names the stuck lidar and the garbled charging reading (with their topics) within 5 ticks of their
    fault; the gated run refuses faulty readings as outliers and its accuracy on the faulty stretch beats the
    ungated run's (the node-level numbers: test/node/test_fault_replay.py)."""
    out = tmp_path / "fault"
    proc = subprocess.run([sys.executable, "-m", "lab.demo", "--fault", "--rate", "2", "--out-dir", str(out)],
                          env=dict(os.environ), capture_output=True, text=True, timeout=600, cwd=repo_root,
                          stdin=subprocess.DEVNULL)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text
    runs = dict(re.findall(r"^(ungated|gated):\n((?:  .*\n)+)", proc.stdout, re.M))
    assert set(runs) == {"ungated", "gated"}, text
    for run, body in runs.items():
        for name, onset in (("lidar_gap", 60), ("charging", 110)):
            m = re.search(rf"warned about {name} from step (\d+) .*{name} on observations/{name}: mean", body)
            assert m and onset <= int(m.group(1)) < onset + 5, (run, name, body)
    accuracy = {run: float(re.search(r"faulty stretch\s+([\d.]+)%", body).group(1)) for run, body in runs.items()}
    assert accuracy["gated"] > accuracy["ungated"], text
    assert re.search(r"lidar_gap [1-9]\d*/50 faulty", runs["gated"]) and re.search(r"charging [1-9]\d*/50 faulty",
                                                                                   runs["gated"]), text
    assert "0/50 faulty" in runs["ungated"] and (out / "gated.png").stat().st_size > 10_000
