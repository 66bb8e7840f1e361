"""README's workspace recipe ("In a ROS 2 workspace"), run as written for Humble, Jazzy and Kilted.

No distro is installed here: each distro is faked with the script's own inputs (ROS_DISTRO, the interpreter's
Python, the distro's numpy, no Jetson release file), the way ``test_ros_pip_deps.py`` fakes them, and the recipe's
lines are read from the README itself, so that an edit of either side is checked. What rosdep installs is read
from package.xml with catkin_pkg's condition evaluation (rosdep evaluates ``condition`` against its environment).
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = "src/bayes_infer_ros/scripts/ros_pip_deps.py"



def recipe_commands() -> list[str]:
    """The README's workspace recipe: its bash block's commands, comments dropped, in order."""
    text = (REPO_ROOT / "README.md").read_text()
    section = text.split("## In a ROS 2 workspace", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    commands = []
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        if words:
            commands.append(" ".join(words))
    return commands


def command_index(commands: list[str], pattern: str) -> int:
    (index,) = [k for k, c in enumerate(commands) if re.search(pattern, c)]
    return index


def test_the_pip_side_runs_in_a_venv_that_sees_the_distro_and_is_built_against():
    commands = recipe_commands()
    venv = command_index(commands, r"^python3 -m venv --system-site-packages \.venv ")
    assert "source .venv/bin/activate" in commands[venv] and "touch .venv/COLCON_IGNORE" in commands[venv]
    script = command_index(commands, re.escape(SCRIPT))
    pip = command_index(commands, r"^pip install -r ")
    build = command_index(commands, r"^colcon build ")
    assert command_index(commands, r"^rosdep install ") < venv < script < pip < build
    written = shlex.split(commands[script])[shlex.split(commands[script]).index("--write") + 1]
    assert shlex.split(commands[pip])[-1] == written and written.startswith(".venv/")
    assert "-DPython3_EXECUTABLE=$PWD/.venv/bin/python" in commands[build]
    assert not [c for c in commands if re.search(r"sudo pip|--user|--break-system-packages", c)]


def run_script_line(deps, monkeypatch, capsys, tmp_path, distro: str, in_venv: bool):
    """The recipe's script line for ``distro``, run in ``tmp_path`` (the workspace) as the shell would: its
    environment assignments, then the script's arguments; the distro's Python and numpy faked."""
    (line,) = [c for c in recipe_commands() if SCRIPT in c]
    words = shlex.split(line)
    at = words.index(SCRIPT)
    assignments = dict(w.split("=", 1) for w in words[:at - 1])
    assert words[at - 1] == "python3"
    python, numpy = deps.DISTRO_DEFAULTS[distro]
    for name in ("ROS_PIP_NUMPY_OVERLAY", "ROS_PIP_CPU_JAX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ROS_DISTRO", distro)
    monkeypatch.setenv(deps.TEGRA_RELEASE_ENV, str(tmp_path / "no_tegra_release"))  # not a Jetson
    for name, value in assignments.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(deps, "in_venv", lambda: in_venv)
    monkeypatch.setattr(deps, "interpreter_version", lambda: python)
    monkeypatch.setattr(deps, "installed_numpy", lambda: numpy)
    monkeypatch.setattr(deps, "installed_dists", lambda: {})
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".venv").mkdir(exist_ok=True)
    code = deps.main(words[at + 1:])
    out = capsys.readouterr()
    written = Path(words[words.index("--write") + 1])
    return code, (tmp_path / written), out.err


@pytest.mark.parametrize("distro", ["humble", "jazzy", "kilted"])
def test_the_script_line_writes_the_file_the_pip_line_reads(deps, monkeypatch, capsys, tmp_path, distro):
    """In the recipe's venv every distro gets a list: Humble numpy 1.26.4 in the venv (its 1.21.5 is older than jax
    needs), Jazzy and Kilted their own numpy kept; jax 0.6.2 (Python 3.10 and 3.12), numba and rosbags."""
    code, written, err = run_script_line(deps, monkeypatch, capsys, tmp_path, distro, in_venv=True)
    assert code == 0, err
    pins = dict(line.split("==") for line in written.read_text().splitlines() if "==" in line)
    assert pins["numpy"] == "1.26.4" and pins["jax"] == pins["jaxlib"] == "0.6.2"
    assert {"numba", "rosbags", "xgboost-cpu", "inferactively-pymdp"} <= set(pins)


def test_the_same_line_outside_the_venv_writes_nothing_on_humble(deps, monkeypatch, capsys, tmp_path):
    """Why the recipe makes the venv first: outside one, Humble's list is refused (exit 3) and the next line would
    have no file."""
    code, written, err = run_script_line(deps, monkeypatch, capsys, tmp_path, "humble", in_venv=False)
    assert code == 3 and not written.exists() and "no list was written" in err


def package_dependencies(environment: dict) -> set[str]:
    """package.xml's dependency keys as rosdep sees them in ``environment`` (catkin_pkg evaluates the conditions)."""
    package = pytest.importorskip("catkin_pkg.package", reason="catkin_pkg (colcon-ros brings it) is not installed")
    parsed = package.parse_package(REPO_ROOT / "package.xml")
    parsed.evaluate_conditions(environment)
    groups = (parsed.build_depends, parsed.buildtool_depends, parsed.exec_depends, parsed.test_depends)
    return {d.name for group in groups for d in group if d.evaluated_condition}


@pytest.mark.parametrize("distro", ["humble", "jazzy", "kilted"])
def test_rosdep_installs_no_pip_package_unless_asked(distro):
    """The recipe's rosdep line resolves no pip key on any distro (Ubuntu 24.04 refuses a system-wide pip, and on
    Humble numba and rosbags would replace what the distro's packages use); BAYES_INFER_ROSDEP_PIP=1 asks for both
    off Humble (an image whose system Python is yours)."""
    pip_keys = {"python3-numba-pip", "python3-rosbags-pip"}
    assert not package_dependencies({"ROS_DISTRO": distro, "ROS_VERSION": "2"}) & pip_keys
    asked = package_dependencies({"ROS_DISTRO": distro, "BAYES_INFER_ROSDEP_PIP": "1"}) & pip_keys
    assert asked == (set() if distro == "humble" else pip_keys)
