"""The command line, the package's top floor: ``bayes-infer COMMAND`` and ``agent_node``.

Each command is a module of this package with ``main(argv) -> int`` (imported when it runs, so ``bayes-infer
--help`` needs neither ROS nor JAX). A command whose optional dependency is missing says which extra installs it
(``OPTIONAL_EXTRAS``) instead of ending in an ImportError. The lab's commands (generator, benchmarks, autotuner
training, the demo) are not installed: ``python -m lab`` in a checkout.
"""
from __future__ import annotations

import importlib
import sys
from typing import Optional

from bayes_infer_ros.cli import stop_signal

COMMANDS = {
    "infer": ("infer", "offline inference on a model file with a random observation stream"),
    "model": ("model", "your own model: from-pymdp, validate, show, layout (docs/your-model.md)"),
    "node": ("node", "run the agent node (ROS args after --ros-args)"),
    "warmup": ("warmup", "compile the kernels and fill the caches the node's configure reads"),
    "make-bag": ("make_bag", "simulate a model and write a rosbag2 (MCAP), e.g. bags/agent_sample"),
    "replay": ("replay", "publish a bag into a running ROS graph"),
    "record": ("record", "record beliefs into a bag"),
    "plot": ("plot", "the demo's figure from a recorded beliefs bag"),
}

# top-level module -> the pip extra of bayes_infer_ros (setup.cfg) that installs it
OPTIONAL_EXTRAS = {
    "rosbags": "bags",
    "matplotlib": "plot",
    "pymdp": "bench",
    "tqdm": "bench",
    "xgboost": "autotune",
    "sklearn": "autotune",
}
ROS_MODULES = ("rclpy", "rosidl_runtime_py", "rosgraph_msgs", "std_msgs", "std_srvs", "diagnostic_msgs",
               "lifecycle_msgs", "rcl_interfaces", "ament_index_python", "builtin_interfaces")


def missing_dependency_message(command: str, module: str, prog: str = "bayes-infer") -> Optional[str]:
    """What to install when ``module`` is missing for ``command`` (None: not an optional dependency we know)."""
    root = module.split(".")[0]
    if root in OPTIONAL_EXTRAS:
        extra = OPTIONAL_EXTRAS[root]
        return (f"{prog} {command}: needs the Python package '{root}', which is not installed. Install the "
                f"[{extra}] extra: pip install 'bayes_infer_ros[{extra}]' (from a checkout: pip install '.[{extra}]'; "
                "`make setup` installs every extra)")
    if root in ROS_MODULES or (root == "bayes_infer_ros" and module.split(".")[1:2] in (["msg"], ["srv"])):
        return (f"{prog} {command}: needs ROS 2 ('{module}' is not importable): run `make setup` and "
                "`source install/setup.bash`, or source your ROS 2 install and this package's colcon install")
    return None


def dispatch(prog: str, package: str, commands: dict[str, tuple[str, str]], argv: list[str]) -> int:
    """Run ``commands[argv[0]]``'s module (``package.<module>``) ``main(argv[1:])``; with no command, ``-h`` or an
    unknown one, print ``prog``'s usage (exit 0, or 2 for an unknown command); a missing optional dependency is
    named with its extra (exit 3)."""
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in commands:
        width = max(map(len, commands))
        print(f"usage: {prog} COMMAND [ARGS...]\n\ncommands:")
        for name, (_, text) in commands.items():
            print(f"  {name.ljust(width)}  {text}")
        return 0 if argv[:1] in ([], ["-h"], ["--help"]) else 2
    try:
        module = importlib.import_module(f"{package}.{commands[argv[0]][0]}")
        return int(module.main(argv[1:]) or 0)
    except ModuleNotFoundError as exc:
        message = missing_dependency_message(argv[0], exc.name or "", prog)
        if message is None:
            raise
        print(message, file=sys.stderr)
        return 3


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["node"]:  # before the node's imports: SIGINT/SIGTERM from here on are a clean stop
        stop_signal.install()
    return dispatch("bayes-infer", __name__, COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
