"""The launch file evaluated with stub ``launch`` / ``launch_ros`` modules (launch itself is not installable from
the PyPI wheels): each action is recorded with the arguments launch_ros would get."""
from __future__ import annotations

import importlib.util
import sys
import types
from unittest import mock

from ros_harness import REPO_ROOT


class _Recorder:
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


class _LaunchConfiguration:
    def __init__(self, name):
        self.name = name

    def perform(self, context):
        return context.launch_configurations[self.name]


def load_launch_description() -> list:
    """launch/agent.launch.py's entities (DeclareLaunchArgument, OpaqueFunction) as recorders."""
    stubs = {
        "launch": types.ModuleType("launch"), "launch.actions": types.ModuleType("launch.actions"),
        "launch.substitutions": types.ModuleType("launch.substitutions"),
        "launch_ros": types.ModuleType("launch_ros"), "launch_ros.actions": types.ModuleType("launch_ros.actions"),
    }
    stubs["launch"].LaunchDescription = lambda entities: list(entities)
    for name in ("DeclareLaunchArgument", "LogInfo", "OpaqueFunction"):
        setattr(stubs["launch.actions"], name, type(name, (_Recorder,), {}))
    stubs["launch.substitutions"].LaunchConfiguration = _LaunchConfiguration
    for name in ("LifecycleNode", "Node"):
        setattr(stubs["launch_ros.actions"], name, type(name, (_Recorder,), {}))
    with mock.patch.dict(sys.modules, stubs):
        spec = importlib.util.spec_from_file_location("agent_launch", REPO_ROOT / "launch" / "agent.launch.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.generate_launch_description()


def launch_actions(launch_args: dict) -> list:
    """The actions the launch file's OpaqueFunction returns for these launch arguments (defaults filled in)."""
    entities = load_launch_description()
    declared = {e.args[0]: e.kwargs["default_value"] for e in entities if type(e).__name__ == "DeclareLaunchArgument"}
    (setup,) = [e for e in entities if type(e).__name__ == "OpaqueFunction"]
    context = types.SimpleNamespace(launch_configurations={**declared, **launch_args})
    return setup.kwargs["function"](context)
