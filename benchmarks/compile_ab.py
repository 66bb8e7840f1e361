"""First-call (compile) times at another revision against the working tree's, case by case, interleaved.

    PYTHONPATH=. python benchmarks/compile_ab.py REV [--ids c0771] [--variants hybrid_block fused_pairwise ...]

REV is checked out in a temporary git worktree. For every (configuration, algorithm, candidate) the case runs once
with REV's package and once with the working tree's, back to back, both measured by the working tree's
``python -m lab compile-times`` (a fresh process per case, JAX's persistent cache off), so load drift hits both alike.
The lab must run against REV's package (its inference API unchanged); without ``InferenceEngine.lower`` at REV its
operation counts stay empty. Rows (``lab/compile_times.py``'s columns and
``revision``) go to ``--out``; a table of first call, XLA compile and optimised-HLO operations, before and after,
is printed at the end.
"""
from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from lab.compile_times import COLUMNS  # noqa: E402
DEFAULT_VARIANTS = ("hybrid_block", "fused_pairwise", "clustered_hybrid_block", "clustered_end_to_end", "hybrid",
                    "clustered_hybrid", "sparse_hybrid", "sparse_hybrid_block")


def one_case(package_dir: Path, cache: Path, out: Path, config: str, algorithm: str, variant: str, hlo: bool,
             time_limit: float) -> dict:
    """The case's row: the working tree's ``compile-times`` with ``package_dir``'s ``bayes_infer_ros`` (first on the
    path: the command runs there)."""
    if out.exists():
        out.unlink()
    cmd = [sys.executable, "-m", "lab", "compile-times", "--quiet", "--no-pymdp", "--cache", str(cache), "--ids", config,
           "--algorithms", algorithm, "--variants", variant, "--case-time-limit", str(time_limit), "--out", str(out)]
    cmd += [] if hlo else ["--no-hlo"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(package_dir), str(ROOT)]))
    subprocess.run(cmd, cwd=package_dir, check=True, stdout=subprocess.DEVNULL, env=env)
    with out.open(newline="") as fh:
        return next(csv.DictReader(fh))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("rev", help="the revision before (e.g. main)")
    p.add_argument("--ids", nargs="+", default=["c0771"])
    p.add_argument("--algorithms", nargs="+", default=["fpi", "vmp", "mmp"])
    p.add_argument("--variants", nargs="+", default=list(DEFAULT_VARIANTS))
    p.add_argument("--cache", type=Path, default=ROOT / ".cache" / "pomdp_configs")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "compile_ab_cpu.csv")
    p.add_argument("--no-hlo", action="store_true", help="skip the second (lowered, then compiled) pass")
    p.add_argument("--case-time-limit", type=float, default=1200.0, help="seconds per case and revision")
    args = p.parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with tempfile.TemporaryDirectory() as tmp, args.out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["revision"] + COLUMNS, extrasaction="ignore")
        writer.writeheader()
        before = Path(tmp) / "before"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(before), args.rev], cwd=ROOT, check=True)
        package_at_rev = Path(tmp) / "package"  # REV's bayes_infer_ros alone (not its lab)
        package_at_rev.mkdir()
        (package_at_rev / "bayes_infer_ros").symlink_to(before / "bayes_infer_ros")
        try:
            for config in args.ids:
                for algorithm in args.algorithms:
                    for variant in args.variants:
                        pair = {}
                        for revision, tree in ((args.rev, package_at_rev), ("working tree", ROOT)):
                            row = one_case(tree, args.cache.resolve(), Path(tmp) / "case.csv", config, algorithm,
                                           variant, not args.no_hlo, args.case_time_limit)
                            row["revision"] = revision
                            writer.writerow(row)
                            fh.flush()
                            written += 1
                            pair[revision] = row
                        b, a = pair[args.rev], pair["working tree"]
                        print(f"{config} {algorithm} {variant:24s} first call {b.get('first_call_s') or b['status']} -> "
                              f"{a.get('first_call_s') or a['status']} s, hlo ops {b.get('hlo_ops')} -> {a.get('hlo_ops')}"
                              f" (load {a.get('loadavg_before')})", flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(before)], cwd=ROOT, check=False)
    print(f"{written} rows -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
