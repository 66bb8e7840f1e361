"""The installed executables run the interpreter the package was built with: started from a clean shell with no
venv active (only PATH=/usr/bin:/bin, HOME, the loopback variables and a domain id, then install/setup.bash), as
`ros2 launch` or a systemd unit starts them, the node comes up and publishes beliefs, and `bayes-infer` works."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ros_harness import default_params, publish_until_beliefs

pytestmark = pytest.mark.ros

PACKAGE = "bayes_infer_ros"
LEVELS = {"rfid_tag": 2, "voltage": 1, "lidar_gap": 0, "charging": 1}


@pytest.fixture(scope="module")
def installed():
    from ament_index_python.packages import get_package_prefix

    prefix = Path(get_package_prefix(PACKAGE))
    setup = prefix.parent / "setup.bash"
    if not setup.is_file():
        pytest.skip(f"{setup} missing: not a colcon install")
    return {"prefix": prefix, "setup": setup, "agent_node": prefix / "lib" / PACKAGE / "agent_node",
            "bayes-infer": prefix / "bin" / "bayes-infer"}


def clean_env(ros_graph) -> dict[str, str]:
    """What a systemd unit or a fresh login shell has: no venv, no PYTHONPATH, nothing of this test's Python."""
    return {"PATH": "/usr/bin:/bin", "HOME": os.environ["HOME"], "ROS_DOMAIN_ID": str(ros_graph["domain_id"]),
            "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", "ROS_LOCALHOST_ONLY": "1"}


def in_clean_shell(setup: Path, *command: str) -> list[str]:
    """``bash -c 'source setup.bash && exec COMMAND...'`` (the arguments passed as they are, no quoting)."""
    return ["bash", "-c", 'source "$1" && shift && exec "$@"', "bash", str(setup), *command]


def test_the_executables_name_the_build_interpreter(installed):
    for name in ("agent_node", "bayes-infer"):
        shebang = installed[name].read_text().splitlines()[0]
        interpreter = shebang[2:].strip()
        assert shebang.startswith("#!/") and "env" not in interpreter.split("/")[-1], shebang
        assert os.access(interpreter, os.X_OK), shebang
    # the interpreter that runs them can import the package's dependencies (this test's is the build's)
    assert Path(installed["agent_node"].read_text().splitlines()[0][2:]).resolve() == Path(sys.executable).resolve()


def test_bayes_infer_runs_from_a_shell_with_no_venv(installed, ros_graph):
    shipped = installed["prefix"] / "share" / PACKAGE / "config" / "agent.yaml"
    run = subprocess.run(in_clean_shell(installed["setup"], "bayes-infer", "model", "validate", str(shipped)),
                         env=clean_env(ros_graph), capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "valid" in run.stdout, run.stdout + run.stderr


def test_the_installed_agent_node_gives_beliefs_from_a_shell_with_no_venv(installed, probe, ros_graph, tmp_path):
    from lab.agent_process import AgentProcess

    from bayes_infer_ros.msg import Beliefs

    params = default_params()
    params.update({"jax_compilation_cache_dir": ros_graph["jax_cache"], "autostart": True, "variant": "baseline",
                   "rate_hz": 0.0})
    params_file = tmp_path / "params.yaml"
    params_file.write_text(yaml.safe_dump({"/**": {"ros__parameters": params}}, sort_keys=False))
    proc = AgentProcess(params_file, namespace="/novenv", env=clean_env(ros_graph), log_path=tmp_path / "novenv.log",
                        executable=in_clean_shell(installed["setup"], str(installed["agent_node"]))).start()
    try:
        assert proc.wait_log("active: tick", 90), proc.log_text()
        beliefs = probe.record("/novenv/beliefs", Beliefs)
        assert publish_until_beliefs(probe, "/novenv", beliefs, LEVELS, 20), proc.log_text()
        assert beliefs[0][1].tick == 1 and len(beliefs[0][1].factors) == 3
    finally:
        code = proc.stop()
    assert code == 0, proc.log_text()
