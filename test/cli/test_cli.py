"""``bayes-infer`` and ``python -m lab``: every command is listed; a missing optional dependency names the extra that
installs it."""
from __future__ import annotations

import sys

import pytest

from bayes_infer_ros import cli


def test_help_lists_every_command(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in ("infer", "model", "node", "warmup", "plot", "replay", "record", "make-bag"):
        assert f"  {name} " in out, name


def test_the_labs_commands_are_its_own(capsys):
    """The lab's commands run from a checkout (``python -m lab``), not from the installed ``bayes-infer``."""
    from lab.__main__ import COMMANDS as LAB_COMMANDS
    from lab.__main__ import main as lab_main

    assert lab_main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in ("generate", "bench", "bench-variants", "report", "autotune-train", "demo"):
        assert f"  {name} " in out and name in LAB_COMMANDS and name not in cli.COMMANDS, name
    assert cli.main(["bench"]) == 2  # unknown to bayes-infer: usage, exit 2


@pytest.mark.parametrize("command,module,blocked,extra", [
    ("replay", "bayes_infer_ros.ros.replay", "rosbags", "bags"),
    ("make-bag", "bayes_infer_ros.bags.make_bag", "rosbags", "bags"),
    ("plot", "bayes_infer_ros.plot", "matplotlib", "plot"),
])
def test_missing_optional_dependency_names_the_extra(monkeypatch, capsys, tmp_path, repo_root, command, module,
                                                     blocked, extra):
    for name in list(sys.modules):  # force a fresh import of the command and of the blocked package
        if (name == module or name == blocked or name.startswith(blocked + ".")
                or name.startswith(("bayes_infer_ros.bags", "bayes_infer_ros.cli."))):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, blocked, None)  # `import blocked` now raises ModuleNotFoundError
    bag = repo_root / "bags" / "agent_sample"
    args = {"replay": [str(bag)], "make-bag": [str(tmp_path / "b")], "plot": [str(bag)]}[command]
    assert cli.main([command] + args) == 3
    err = capsys.readouterr().err
    assert f"needs the Python package '{blocked}'" in err and f"pip install 'bayes_infer_ros[{extra}]'" in err, err


def test_unknown_missing_module_is_not_hidden():
    assert cli.missing_dependency_message("x", "some_private_module") is None
    assert "make setup" in cli.missing_dependency_message("replay", "rclpy")


def test_make_setup_puts_bayes_infer_into_the_venv(tmp_path, repo_root):
    """The Makefile's rule (part of `make setup`) writes .venv/bin/bayes-infer run by the venv's Python; here
    with a stand-in venv whose setup stamp exists, so only that rule runs."""
    import os
    import subprocess

    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / ".bayes_infer_ros-setup").touch()
    out = subprocess.run(["make", "-C", str(repo_root), f"VENV={venv}", f"{venv}/bin/bayes-infer"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    script = venv / "bin" / "bayes-infer"
    assert script.read_text().startswith(f"#!{venv.resolve()}/bin/python\n") and os.access(script, os.X_OK)
    env = {**os.environ, "PYTHONPATH": str(repo_root)}
    # the top-level help imports only the CLI: the stand-in venv's interpreter need not see jax
    run = subprocess.run([str(script), "--help"], capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 0 and "from-pymdp" in run.stdout, run.stderr
