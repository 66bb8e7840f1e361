"""``bayes-infer``: one command, subcommands mapped to ``module:main(argv) -> int`` (imported lazily)."""
from __future__ import annotations

import importlib
import sys
from typing import Optional

COMMANDS = {
    "infer": ("bayes_infer_ros.offline", "offline inference on a model file with a random observation stream"),
    "node": ("bayes_infer_ros.ros.agent_node", "run the agent node (ROS args after --ros-args)"),
    "demo": ("bayes_infer_ros.demo", "the live demo: node + sample bag replay + summary and plot"),
    "generate": ("bayes_infer_ros.bench.generator", "generate the paper's POMDP configurations into a cache"),
    "bench": ("bayes_infer_ros.bench.harness", "benchmark every variant x algorithm vs pymdp (resumable CSV)"),
    "bench-variants": ("bayes_infer_ros.bench.variants_benchmark", "the dozen-model variants benchmark"),
    "report": ("bayes_infer_ros.bench.report", "plots and summary tables from benchmark CSVs"),
    "autotune-train": ("bayes_infer_ros.autotune.train", "train the autotuner from a benchmark CSV"),
    "make-bag": ("bayes_infer_ros.bags.make_bag", "simulate the default model and write a rosbag2 (MCAP)"),
    "replay": ("bayes_infer_ros.ros.replay", "publish a bag into a running ROS graph"),
    "record": ("bayes_infer_ros.ros.recorder", "record beliefs into a bag"),
}


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        width = max(map(len, COMMANDS))
        print("usage: bayes-infer COMMAND [ARGS...]\n\ncommands:")
        for name, (_, text) in COMMANDS.items():
            print(f"  {name.ljust(width)}  {text}")
        return 0 if argv[:1] in ([], ["-h"], ["--help"]) else 2
    module = importlib.import_module(COMMANDS[argv[0]][0])
    return int(module.main(argv[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main())
