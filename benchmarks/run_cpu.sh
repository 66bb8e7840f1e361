#!/usr/bin/env bash
# How the committed CPU benchmark files were produced (from the repository root, venv active).
# Every step resumes: rerun the script after an interruption and it continues where it stopped.
# The two CPU cores each run one shard (the sweep is bound by XLA compile time, single-threaded).
set -euo pipefail
export JAX_PLATFORMS=cpu
CACHE=.cache/pomdp_configs
SWEEP_MINUTES=${SWEEP_MINUTES:-62}
PER_STRATUM=${PER_STRATUM:-20}
N_ITER=${N_ITER:-60}
RF_N_ITER=${RF_N_ITER:-$N_ITER}
T=.cache/bench_shards  # intermediate shard CSVs and logs (git-ignored)
mkdir -p $T

# 1. The paper's V-A configurations (900; structures only, arrays built and cached on first use).
python -m bayes_infer_ros.cli generate --out "$CACHE" --index-only > /dev/null

# 2. Issue 3's variants benchmark: a dozen models, small to large, every variant vs pymdp, list + packed API.
for i in 0 1; do
  python -m bayes_infer_ros.cli bench-variants --cache "$CACHE" --out $T/variants_cpu.$i.csv --shard $i/2 \
      --min-time 0.1 --max-time 1 --case-time-limit 240 --no-progress > $T/variants_cpu.$i.log 2>&1 &
done
wait
python -m bayes_infer_ros.cli bench --merge benchmarks/variants_cpu.csv $T/variants_cpu.0.csv $T/variants_cpu.1.csv
python -m bayes_infer_ros.cli bench-variants --out benchmarks/variants_cpu.csv --table-only | tee benchmarks/variants_cpu.md

# 3. A stratified subset for the autotuner: PER_STRATUM configurations per (F, M, regime) stratum with
#    F, M <= 10 (XLA compile time: ~3 s per program at M = 10, 10-13 s at M = 25, 15-60 s at M = 125 here),
#    list API only, time-boxed (the strata are interleaved, so a stopped sweep is still stratified; it resumes).
#    Rows already in benchmarks/sweep_cpu.csv (earlier, smaller sweeps) are kept in the merge.
DOZEN=$(python -c "from bayes_infer_ros.bench.variants_benchmark import dozen_models; \
from bayes_infer_ros.bench.generator import generate_specs; print(' '.join(s.config_id for s in dozen_models(generate_specs())))")
for i in 0 1; do
  python -m bayes_infer_ros.cli bench --cache "$CACHE" --out $T/sweep_cpu.$i.csv --per-stratum "$PER_STRATUM" \
      --max-fm 10 --exclude $DOZEN --no-packed --min-time 0.1 --max-time 1 --case-time-limit 240 \
      --max-minutes "$SWEEP_MINUTES" --shard $i/2 --no-progress > $T/sweep_cpu.$i.log 2>&1 &
done
wait
python -m bayes_infer_ros.cli bench --merge benchmarks/sweep_cpu.csv $(ls benchmarks/sweep_cpu.csv 2>/dev/null) \
    $T/sweep_cpu.0.csv $T/sweep_cpu.1.csv

# 4. The autotuner (paper protocol) on both CSVs; ships models + training CSV in the package.
python -m bayes_infer_ros.cli autotune-train benchmarks/variants_cpu.csv benchmarks/sweep_cpu.csv \
    --n-iter "$N_ITER" --rf-n-iter "$RF_N_ITER" --jobs 2 --report-dir benchmarks | tee benchmarks/autotune_train_cpu.txt

# 5. Plots and summaries (autotuner = out-of-fold choices): list call, packed call, jitted program alone.
python -m bayes_infer_ros.cli report benchmarks/variants_cpu.csv benchmarks/sweep_cpu.csv --tag cpu \
    --autotune benchmarks/autotune_cv_cpu.csv > /dev/null
python -m bayes_infer_ros.cli report benchmarks/variants_cpu.csv benchmarks/sweep_cpu.csv --tag cpu_core \
    --metric core_median_s --autotune benchmarks/autotune_cv_cpu.csv > /dev/null
python -m bayes_infer_ros.cli report benchmarks/variants_cpu.csv --tag cpu_packed --metric packed_median_s \
    --autotune benchmarks/autotune_cv_cpu.csv > /dev/null
