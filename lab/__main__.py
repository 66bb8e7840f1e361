"""``python -m lab COMMAND [ARGS...]``: the lab's commands, run from a checkout."""
from __future__ import annotations

import importlib
import sys
from typing import Optional

from bayes_infer_ros.cli import missing_dependency_message

COMMANDS = {
    "generate": ("generator", "generate the paper's POMDP configurations into a cache"),
    "bench": ("harness", "benchmark every variant x algorithm vs pymdp (resumable CSV)"),
    "bench-variants": ("variants_benchmark", "the dozen-model variants benchmark"),
    "report": ("report", "plots and summary tables from benchmark CSVs"),
    "autotune-train": ("train_autotuner", "train the autotuner from a benchmark CSV"),
    "demo": ("demo", "the live demo: node + sample bag replay + summary and plot"),
    "rclpy-api": ("rclpy_api", "check the rclpy API the node uses against rclpy's branches"),
}


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        width = max(map(len, COMMANDS))
        print("usage: python -m lab COMMAND [ARGS...]\n\ncommands:")
        for name, (_, text) in COMMANDS.items():
            print(f"  {name.ljust(width)}  {text}")
        return 0 if argv[:1] in ([], ["-h"], ["--help"]) else 2
    try:
        module = importlib.import_module(f"lab.{COMMANDS[argv[0]][0]}")
        return int(module.main(argv[1:]) or 0)
    except ModuleNotFoundError as exc:
        message = missing_dependency_message(argv[0], exc.name or "")
        if message is None:
            raise
        print(message, file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
