"""The JAX variants at another revision against the working tree's on one model, round-robin in one process.

    PYTHONPATH=. python benchmarks/variants_ab.py REV [--model config/agent.yaml] [--variants hybrid_block ...]

REV's ``bayes_infer_ros/model`` and ``bayes_infer_ros/inference`` are loaded as a second copy of their own
(``bayes_infer_ros_at_rev``, from ``git archive``). Per algorithm, every (revision, variant) engine is built on the
same model and called on the same inputs as the node calls it (fpi: ``step``, the one-dispatch tick with its
results on the host; vmp / mmp: ``run_packed`` over a ``--horizon`` window with ``valid_steps``); the beliefs of the
two revisions are compared element-wise (``max|new-old|``), and all engines of the algorithm are timed together
with ``timing.time_round_robin``. ``new/old`` is the ratio of the p10 per-call times (< 1: the working tree is faster).
"""
from __future__ import annotations

import argparse
import importlib
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bayes_infer_ros.autotune.timing import time_round_robin  # noqa: E402
from bayes_infer_ros.inference import build_inference  # noqa: E402
from bayes_infer_ros.model.io import load_model  # noqa: E402

DEFAULT_VARIANTS = ("baseline", "hybrid", "clustered_hybrid", "hybrid_block", "clustered_hybrid_block",
                    "clustered_end_to_end", "fused_dense", "fused_pairwise")
PACKAGE_AT_REV = "bayes_infer_ros_at_rev"


def load_at(rev: str, folder: Path):
    """REV's ``build_inference``: its model and inference packages written under ``folder`` and imported as
    ``bayes_infer_ros_at_rev``."""
    archive = folder / "rev.tar"
    subprocess.run(["git", "archive", "-o", str(archive), rev, "bayes_infer_ros/model", "bayes_infer_ros/inference"],
                   cwd=ROOT, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(folder, filter="data")
    (folder / "bayes_infer_ros").rename(folder / PACKAGE_AT_REV)
    (folder / PACKAGE_AT_REV / "__init__.py").write_text("")
    sys.path.insert(0, str(folder))
    return importlib.import_module(f"{PACKAGE_AT_REV}.inference").build_inference


def calls(engine, model, algorithm: str, horizon: int, rng: np.random.Generator):
    """(the node's call on one seeded input, its beliefs as one float64 array)."""
    layout = engine.layout
    T = 1 if algorithm == "fpi" else horizon
    obs = [np.eye(a.shape[0], dtype=np.float32)[rng.integers(0, a.shape[0], size=T)] for a in model.A]
    ob = np.ascontiguousarray(layout.pack_obs([o[0] for o in obs] if algorithm == "fpi" else obs), dtype=np.float32)
    pr = np.ascontiguousarray(layout.pack_states([np.asarray(d, np.float32) for d in model.D]), dtype=np.float32)
    if algorithm == "fpi":
        rows = ob[None], pr[None], np.zeros((1, len(model.D)), np.int32)
        return (lambda: engine.step(*rows)), lambda: np.asarray(engine.step(*rows)[0, :layout.state_size])
    actions = np.zeros((T - 1, len(model.D)), np.int32)
    fn = lambda: engine.run_packed(ob, pr, actions, valid_steps=T)  # noqa: E731
    return fn, lambda: np.asarray(fn(), dtype=np.float64)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("rev", help="the revision to compare the working tree with (e.g. main)")
    p.add_argument("--model", type=Path, default=ROOT / "config" / "agent.yaml")
    p.add_argument("--variants", nargs="+", default=list(DEFAULT_VARIANTS))
    p.add_argument("--algorithms", nargs="+", default=["fpi", "vmp", "mmp"])
    p.add_argument("--horizon", type=int, default=5)
    p.add_argument("--num-iter", type=int, default=16)
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--max-time", type=float, default=6.0, help="seconds of round-robin per algorithm (at most)")
    args = p.parse_args(argv)
    model = load_model(args.model)
    print(f"# {' '.join(sys.argv)}\n# machine {platform.node()}, load average {os.getloadavg()}, model {args.model}")
    with tempfile.TemporaryDirectory() as tmp:
        build_old = load_at(args.rev, Path(tmp))
        print("| algorithm | variant | old us (p10) | new us (p10) | old median | new median | new/old | max abs(new-old) |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for algorithm in args.algorithms:
            cands, diffs = {}, {}
            for variant in args.variants:
                pair = []
                for tag, build in (("old", build_old), ("new", build_inference)):
                    engine = build(algorithm, model.A, model.A_dependencies, model.B, model.B_dependencies,
                                   variant=variant, num_iter=args.num_iter)
                    fn, result = calls(engine, model, algorithm, args.horizon, np.random.default_rng(0))
                    cands[(tag, variant)] = fn
                    pair.append(result())
                diffs[variant] = float(np.max(np.abs(pair[1] - pair[0])))
            timed = time_round_robin({f"{t}:{v}": fn for (t, v), fn in cands.items()}, rounds=args.rounds,
                                     max_time_s=args.max_time)
            for variant in args.variants:
                old, new = timed[f"old:{variant}"], timed[f"new:{variant}"]
                print(f"| {algorithm} | {variant} | {old.time_s * 1e6:.1f} | {new.time_s * 1e6:.1f} | "
                      f"{old.median_s * 1e6:.1f} | {new.median_s * 1e6:.1f} | {new.time_s / old.time_s:.2f} | "
                      f"{diffs[variant]:.1e} |", flush=True)
    print(f"# load average after {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
