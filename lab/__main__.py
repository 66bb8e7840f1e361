"""``python -m lab COMMAND [ARGS...]``: the lab's commands, run from a checkout."""
from __future__ import annotations

import sys
from typing import Optional

from bayes_infer_ros.cli import dispatch

COMMANDS = {
    "generate": ("generator", "generate the paper's POMDP configurations into a cache"),
    "bench": ("harness", "benchmark every variant x algorithm vs pymdp (resumable CSV)"),
    "bench-variants": ("variants_benchmark", "the dozen-model variants benchmark"),
    "compile-times": ("compile_times", "first-call (compile) times of pymdp and every JAX variant, one process each"),
    "scale": ("scale", "the paper's scale in one run: compiles, round-robin timings, reports, one deadline"),
    "report": ("report", "plots and summary tables from benchmark CSVs"),
    "readme-tables": ("readme_tables", "rewrite (or --check) the generated tables of README, benchmarks/README, docs"),
    "bench-check": ("bench_check", "the speed gate: call and tick ratios against the committed baselines"),
    "bench-holdout": ("holdout_benchmark", "fused_numba against pymdp on unseen generated models, every algorithm"),
    "bench-unseen": ("unseen_benchmark", "variant: auto against baseline on models the autotuner never saw"),
    "bench-fleet": ("fleet_benchmark", "many agents in one node against one process per agent (needs ROS)"),
    "first-start": ("first_start", "the node's first start after an install, and a warm start (needs ROS)"),
    "autotune-train": ("train_autotuner", "train the autotuner from a benchmark CSV"),
    "demo": ("demo", "the live demo: node + sample bag replay + summary and plot"),
    "rclpy-api": ("rclpy_api", "check the rclpy API the node uses against rclpy's branches"),
    "tmaze-policy": ("tmaze_policy", "pymdp's T-maze closed-loop through our engine and policy inference vs pymdp"),
    "stop-probe": ("stop_probe", "SIGINT at many moments of the node's start-up: exit statuses and times (needs ROS)"),
}


def main(argv: Optional[list[str]] = None) -> int:
    return dispatch("python -m lab", "lab", COMMANDS, list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
