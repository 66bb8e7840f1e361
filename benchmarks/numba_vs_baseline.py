"""fused_numba against the baseline JAX engine on generator models, round-robin in one process.

    PYTHONPATH=. python benchmarks/numba_vs_baseline.py c0132,c0247,c0193,c0677,c0704

Per configuration, FPI (``engine.tick``) and VMP (T = 5, ``run_packed``): both engines built, then
``timing.time_round_robin`` (20 rounds, at most 3 s); prints the 10th-percentile times and numba / baseline.
Run once on each side of a kernel change (``git checkout <rev> -- bayes_infer_ros/inference/native/``):
the ratio to the unchanged baseline engine compares the two kernels across processes.
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bayes_infer_ros.autotune.select import engine_call  # noqa: E402
from bayes_infer_ros.autotune.timing import time_round_robin  # noqa: E402
from lab import generator  # noqa: E402
from bayes_infer_ros.inference import build_inference  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("config_ids", help="comma-separated generator configuration ids, e.g. c0132,c0247")
    args = p.parse_args(argv)
    specs = {s.config_id: s for s in generator.generate_specs()}
    for cid in args.config_ids.split(","):
        model = generator.build_model(specs[cid])
        for alg in ("fpi", "vmp"):
            calls = {}
            for v in ("fused_numba", "baseline"):
                e = build_inference(alg, model.A, model.A_dependencies, model.B, model.B_dependencies, variant=v,
                                    num_iter=16)
                calls[v] = engine_call(e, alg, 5)
            t = time_round_robin(calls, rounds=20, max_time_s=3.0)
            print(cid, alg, {k: round(v.time_s * 1e6) for k, v in t.items()}, "us; numba/baseline",
                  round(t["fused_numba"].time_s / t["baseline"].time_s, 3), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
