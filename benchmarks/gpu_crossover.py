"""The crossover table of a GPU sweep: pymdp on the GPU, the best GPU candidate, fused_numba on the host CPU, and
the model size from which the GPU wins (``lab/crossover.py``).

    python benchmarks/gpu_crossover.py benchmarks/sweep_<device>.csv [--metric time_s] > benchmarks/crossover_<device>.md
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lab.crossover import crossover, main, render, table  # noqa: E402

__all__ = ["crossover", "main", "render", "table"]

if __name__ == "__main__":
    raise SystemExit(main())
