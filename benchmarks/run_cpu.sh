#!/usr/bin/env bash
# How the committed CPU benchmark files of the PREVIOUS engine were produced (block timing, one case at a time:
# sweep_cpu.csv, variants_cpu.csv, summary_cpu*, violin_cpu*, params_vs_latency_cpu*), as run at commit abb54a7,
# whose harness had the options used here (--min-time); the round-robin harness and run_cpu_engine.sh replace it.
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

# 3b. Beyond F, M <= 10 (2026-11-21, 03:35-04:44 UTC): the first 3 configurations of each M = 25 stratum, then
#     the first 2 of each M = 125 stratum and 3 more of each M = 25 stratum (stratified order, --ids keeps it),
#     time-boxed (a configuration cut off mid-way is left out of training until a rerun completes it).
BATCH1="c0247 c0193 c0459 c0510 c0677 c0704 c0198 c0191 c0538 c0520 c0687 c0710 c0218 c0254 c0496 c0461 c0675 c0653"
BATCH2="c0345 c0340 c0586 c0573 c0735 c0804 c0845 c0863 c0189 c0222 c0508 c0706 c0632 c0268 c0232 c0465 c0484 \
c0665 c0226 c0220 c0335 c0270 c0609 c0593 c0808 c0784 c0838 c0871 c0668 c0712 c0245 c0495 c0483 c0656 c0661 c0255"
for batch in "sweep25:$BATCH1:85" "sweep3:$BATCH2:45"; do
  IFS=: read -r name ids minutes <<< "$batch"
  for i in 0 1; do
    python -m bayes_infer_ros.cli bench --cache "$CACHE" --out $T/${name}_cpu.$i.csv --ids $ids --no-packed \
        --min-time 0.1 --max-time 1 --case-time-limit 240 --max-minutes "$minutes" --shard $i/2 --no-progress \
        > $T/${name}_cpu.$i.log 2>&1 &
  done
  wait
  python -m bayes_infer_ros.cli bench --merge benchmarks/sweep_cpu.csv benchmarks/sweep_cpu.csv \
      $T/${name}_cpu.0.csv $T/${name}_cpu.1.csv
done

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
