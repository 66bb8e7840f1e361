#!/usr/bin/env bash
# The new engine's CPU benchmarks (execution modes, fused family, numba, round-robin timing), as run for the
# committed files (from the repository root, venv active and install/setup.bash sourced; every bench step resumes
# where it stopped when rerun).
set -euo pipefail
export JAX_PLATFORMS=cpu
CACHE=.cache/pomdp_configs
T=.cache/bench_shards_engine
mkdir -p $T
python -m lab generate --out "$CACHE" --index-only > /dev/null

# 1. The sweep (round-robin timing: every variant and pymdp of one configuration and algorithm in one worker,
#    interleaved rounds; time_s = p10 over rounds). The committed sweep_engine_cpu.csv is the 13 configurations
#    (12 strata, F, M <= 25) that the first time-boxed stratified run reached, re-run on the kernels of 0170c6c
#    (subnormals flushed, vectorised loops), on a quiet machine (2026-11-23 08:15-08:29 UTC, load 1.1-1.9),
#    small models first.
python -m lab bench --cache "$CACHE" --out $T/sweep_rr7.csv \
    --ids c0049 c0031 c0056 c0145 c0132 c0396 c0374 c0193 c0247 c0459 c0677 c0704 c0510 --no-packed \
    --rounds 30 --max-time 1 --case-time-limit 120 --max-minutes 40 --no-progress > $T/sweep_rr7.log 2>&1
cp $T/sweep_rr7.csv benchmarks/sweep_engine_cpu.csv
#    The M = 125 strata, one configuration each (25th percentile of A size), smallest first, 55-minute box:
python -m lab bench --cache "$CACHE" --out $T/sweep_m125.csv \
    --ids c0308 c0877 c0788 c0559 c0823 c0284 c0722 c0571 --no-packed --rounds 30 --max-time 1 \
    --case-time-limit 120 --max-minutes 55 --no-progress > $T/sweep_m125.log 2>&1
cp $T/sweep_m125.csv benchmarks/sweep_engine_m125_cpu.csv
#    The three uniform M = 125 strata that box did not reach (F5, F10, F25), on the kernels of d3f4670
#    (2026-11-23 12:16 UTC, quiet), appended to the same file:
python -m lab bench --cache "$CACHE" --out $T/sweep_m125u.csv --ids c0284 c0571 c0722 --no-packed \
    --rounds 30 --max-time 1 --case-time-limit 120 --max-minutes 38 --no-progress > $T/sweep_m125u.log 2>&1
tail -n +2 $T/sweep_m125u.csv >> benchmarks/sweep_engine_m125_cpu.csv
python -m lab report benchmarks/sweep_engine_m125_cpu.csv --tag engine_m125_cpu --no-plots
#    The full stratified sweep (resumable; 3 configurations per stratum, time-boxed):
# python -m lab bench --cache "$CACHE" --out $T/sweep_rr.csv --per-stratum 3 --max-fm 25 --no-packed \
#     --rounds 30 --max-time 1 --case-time-limit 120 --max-minutes "${SWEEP_MINUTES:-50}" --no-progress > $T/sweep_rr.log 2>&1

# 2. The noise floor: two runs of the same 6 small configurations, one after the other, on a quiet machine.
IDS="c0049 c0031 c0145 c0132 c0396 c0374"
for run in a b; do
  python -m lab bench --cache "$CACHE" --out $T/noise_$run.csv --ids $IDS --no-packed --rounds 30 \
      --max-time 1 --case-time-limit 120 --max-minutes 10 --no-progress > $T/noise_$run.log 2>&1
done
cp $T/noise_a.csv benchmarks/noise_a_engine_cpu.csv && cp $T/noise_b.csv benchmarks/noise_b_engine_cpu.csv
{ PYTHONPATH=. python benchmarks/noise_floor.py $T/noise_a.csv $T/noise_b.csv
  PYTHONPATH=. python benchmarks/noise_floor.py $T/sweep_rr.csv $T/noise_b.csv; } | tee benchmarks/noise_floor_engine_cpu.txt

# 3. Threads and affinity, the default model's programs next to pymdp, and the node's tick against the same call
#    offline (hot and paced at 50 Hz).
bash benchmarks/cpu_threads.sh | tee benchmarks/cpu_threads_cpu.txt
python benchmarks/xla_cpu_modes.py --rounds 40 2>&1 | grep -v "^I1" | tee benchmarks/xla_cpu_modes_cpu.txt
python benchmarks/node_latency.py --seconds 15 --variants baseline fused_numba fused_pairwise --no-start \
    > benchmarks/node_latency_engine_cpu.json
python benchmarks/verify_cost.py | grep -v "^I1" | tee benchmarks/verify_cost_cpu.txt

# 4. The autotuner on both sweeps (18 / 17 / 17 configurations; 60 / 30 search draws), the model for machines without numba,
#    then the reports: summary tables, violins, params vs latency (autotuner = out-of-fold choices); and the checks
#    of verify on unseen models, of the companion thread, and of the numba kernel against baseline.
python -m lab autotune-train benchmarks/sweep_engine_cpu.csv benchmarks/sweep_engine_m125_cpu.csv \
    --n-iter 60 --rf-n-iter 30 --jobs 2 --report-dir benchmarks | tee benchmarks/autotune_train_cpu.txt
python -m lab autotune-train benchmarks/sweep_engine_cpu.csv benchmarks/sweep_engine_m125_cpu.csv --n-iter 60 --rf-n-iter 30 --jobs 2 \
    --exclude fused_numba --tag cpu_portable --report-dir $T/portable | grep "configs," >> benchmarks/autotune_train_cpu.txt
python -m lab report benchmarks/sweep_engine_cpu.csv --tag engine_cpu --autotune benchmarks/autotune_cv_cpu.csv
python -m lab bench-unseen --models 16 --csv benchmarks/unseen_vs_baseline_cpu.csv > benchmarks/unseen_vs_baseline_cpu.md
ROS_DOMAIN_ID=77 python benchmarks/companion_gil.py --seconds 30 > benchmarks/companion_gil_cpu.json
PYTHONPATH=. python benchmarks/numba_vs_baseline.py c0132,c0247,c0193,c0677,c0704
# The one-off A/Bs of kernel and tick changes and their commands: benchmarks/archive/README.md.
python -m lab bench-variants --max-minutes 30 --no-progress  # benchmarks/variants_cpu.csv; its printed tables -> variants_cpu.md
