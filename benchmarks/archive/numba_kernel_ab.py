"""fused_numba's kernels at another commit against the working tree's, same engine arrays, round-robin in one process.

    PYTHONPATH=. python benchmarks/archive/numba_kernel_ab.py REV [--ids c0049,c0031,...] [--dtypes float32 float64]

REV's kernels are loaded as a second copy: the kernel modules of ``bayes_infer_ros/inference/native/`` (every one
but ``__init__``, the engines' modules ``engine``, ``arrays`` and ``host``, and the CUDA modules) as a package of
their own, or, at a revision before that folder, ``bayes_infer_ros/inference/native_kernels.py``. Per
configuration, algorithm and dtype both kernels get the same arguments (the working tree's engine, a random observation sequence and prior;
VMP/MMP over T = 5, 16 iterations), are timed with ``timing.time_round_robin`` (30 rounds, at most 3 s) and
compared element-wise: ``new/old`` is the time ratio, ``max|new-old|`` the largest difference of the beliefs.
"""
from __future__ import annotations

import argparse
import importlib.util
import inspect
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bayes_infer_ros.autotune.timing import time_round_robin  # noqa: E402
from lab import generator  # noqa: E402
from bayes_infer_ros.inference import build_inference  # noqa: E402
from bayes_infer_ros.inference.native import fpi as current_fpi  # noqa: E402
from bayes_infer_ros.inference.native import sequence as current_sequence  # noqa: E402
from bayes_infer_ros.model.io import load_model  # noqa: E402

KERNELS = "bayes_infer_ros/inference/native/"
FLAT_KERNELS = "bayes_infer_ros/inference/native_kernels.py"  # the kernels' one file before native/
NOT_KERNELS = ("__init__.py", "engine.py", "arrays.py", "host.py")  # and cuda_*.py


def git_show(rev: str, path: str) -> str:
    return subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def load_kernels_at(rev: str, folder: Path) -> SimpleNamespace:
    """REV's ``fpi`` and ``sequence`` entry points, their sources written to ``folder`` (numba caches next to them)
    and imported under names of their own."""
    listed = subprocess.run(["git", "ls-tree", "--name-only", rev, KERNELS], cwd=ROOT, check=True, capture_output=True,
                            text=True).stdout.split()
    if not listed:
        path = folder / "native_kernels_at_rev.py"
        path.write_text(git_show(rev, FLAT_KERNELS))
        spec = importlib.util.spec_from_file_location("native_kernels_at_rev", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return SimpleNamespace(fpi=module.fpi, sequence=module.sequence)
    package = folder / "native_kernels_at_rev"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for path in listed:
        name = Path(path).name
        if name.endswith(".py") and name not in NOT_KERNELS and not name.startswith("cuda_"):
            (package / name).write_text(git_show(rev, path))
    sys.path.insert(0, str(folder))
    fpi = importlib.import_module("native_kernels_at_rev.fpi")
    sequence = importlib.import_module("native_kernels_at_rev.sequence")
    return SimpleNamespace(fpi=fpi.fpi, sequence=sequence.sequence)


def kernel_call(module, engine, algorithm: str, obs: np.ndarray, prior: np.ndarray, actions: np.ndarray):
    """A zero-argument call of ``module``'s kernel on ``engine``'s arrays; returns its output array. The arguments
    go by name, in the order of that kernel's own signature (a revision's order may differ from the working tree's:
    ``native/schema.py``)."""
    e = engine
    lead = (1,) if algorithm == "fpi" else (1, obs.shape[1])
    out = np.empty(lead + (e.layout.state_size,), e.dtype)
    fn = module.fpi if algorithm == "fpi" else module.sequence
    call = {"kind_vmp": algorithm == "vmp", "obs": obs, "prior": prior, "actions": actions, "valid_steps": -1,
            "num_iter": e.num_iter, "tau": e.dtype.type(e.tau), "minval": e.model.minval, "out": out}
    args = [call[n] if n in call else getattr(e.model, n) for n in inspect.signature(fn.py_func).parameters]
    return lambda: (fn(*args), out)[1]


def random_inputs(engine, algorithm: str, horizon: int, seed: int = 0):
    """One-hot observations of random levels, a Dirichlet prior, zero actions: (obs, prior, actions)."""
    lay, rng = engine.layout, np.random.default_rng(seed)
    T = 1 if algorithm == "fpi" else horizon
    obs = np.zeros((1, T, lay.obs_size), engine.dtype)
    for t in range(T):
        for m, off in enumerate(lay.obs_offsets[:-1]):
            obs[0, t, off + rng.integers(lay.obs_offsets[m + 1] - off)] = 1.0
    prior = np.concatenate([rng.dirichlet(np.ones(n)) for n in lay.num_states]).astype(engine.dtype)[None]
    actions = np.zeros((1, max(T - 1, 0), len(lay.num_states)), np.int64)
    return (obs[:, 0] if algorithm == "fpi" else obs), prior, actions


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("rev", help="the commit whose kernels are 'old'")
    p.add_argument("--ids", default="default,c0049,c0031,c0145,c0677,c0193,c0704",
                   help="generator configurations; 'default' is config/agent.yaml's model")
    p.add_argument("--dtypes", nargs="+", default=["float32", "float64"])
    p.add_argument("--horizon", type=int, default=5)
    args = p.parse_args(argv)
    current = SimpleNamespace(fpi=current_fpi.fpi, sequence=current_sequence.sequence)
    specs = {s.config_id: s for s in generator.generate_specs()}
    with tempfile.TemporaryDirectory() as tmp:
        old = load_kernels_at(args.rev, Path(tmp))
        print(f"old = {args.rev}'s kernels, new = working tree's; p10 over 30 round-robin rounds", flush=True)
        for cid in args.ids.split(","):
            if cid == "default":
                model = load_model(ROOT / "config" / "agent.yaml")
            else:
                model = generator.build_model(specs[cid])
            for dtype in args.dtypes:
                for alg in ("fpi", "vmp", "mmp"):
                    engine = build_inference(alg, model.A, model.A_dependencies, model.B, model.B_dependencies,
                                             variant="fused_numba", num_iter=16, dtype=dtype)
                    inputs = random_inputs(engine, alg, args.horizon)
                    calls = {"old": kernel_call(old, engine, alg, *inputs),
                             "new": kernel_call(current, engine, alg, *inputs)}
                    diff = float(np.abs(calls["old"]().astype(np.float64) - calls["new"]()).max())
                    t = time_round_robin(calls, rounds=30, max_time_s=3.0)
                    a, b = t["old"].time_s * 1e6, t["new"].time_s * 1e6
                    print(f"{cid} {alg} {dtype}: old {a:.1f} us, new {b:.1f} us, new/old {b / a:.3f}, "
                          f"max|new-old| {diff:.2g}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
