#!/usr/bin/env bash
# The new engine's CPU benchmarks (execution modes, fused family, numba), as run for the committed files
# (from the repository root, venv active; resumable like run_cpu.sh). MINUTES time-boxes each timed batch.
set -euo pipefail
export JAX_PLATFORMS=cpu
CACHE=.cache/pomdp_configs
MINUTES=${MINUTES:-14}
T=.cache/bench_shards_engine
mkdir -p $T
python -m bayes_infer_ros.cli generate --out "$CACHE" --index-only > /dev/null

# 1. The default model, one process: XLA:CPU execution mode of every program, the dispatch floor (a trivial
#    jitted call), pymdp and every variant round-robin; as shipped, with the opt-in XLA flags
#    (inference/xla_config.py), and pinned to one core.
{
  python benchmarks/xla_cpu_modes.py --rounds 40
  BAYES_INFER_XLA_DEFAULTS=1 python benchmarks/xla_cpu_modes.py --rounds 40
  taskset -c 0 python benchmarks/xla_cpu_modes.py --rounds 40
} 2>&1 | grep -v "^I1" | tee benchmarks/xla_cpu_modes_cpu.txt

# 2. The variants benchmark (the dozen models), two shards, time-boxed.
for i in 0 1; do
  python -m bayes_infer_ros.cli bench-variants --cache "$CACHE" --out $T/variants_cpu.$i.csv --shard $i/2 \
      --min-time 0.1 --max-time 1 --case-time-limit 240 --max-minutes "$MINUTES" --no-progress \
      > $T/variants_cpu.$i.log 2>&1 &
done
wait
python -m bayes_infer_ros.cli bench --merge benchmarks/variants_engine_cpu.csv $T/variants_cpu.0.csv $T/variants_cpu.1.csv
python -m bayes_infer_ros.cli bench-variants --out benchmarks/variants_engine_cpu.csv --table-only | tee benchmarks/variants_engine_cpu.md

# 3. A stratified sweep subset (F, M <= 10, PER_STRATUM per stratum), list API, time-boxed.
DOZEN=$(python -c "from bayes_infer_ros.bench.variants_benchmark import dozen_models; \
from bayes_infer_ros.bench.generator import generate_specs; print(' '.join(s.config_id for s in dozen_models(generate_specs())))")
for i in 0 1; do
  python -m bayes_infer_ros.cli bench --cache "$CACHE" --out $T/sweep_cpu.$i.csv --per-stratum "${PER_STRATUM:-2}" \
      --max-fm 10 --exclude $DOZEN --no-packed --min-time 0.1 --max-time 1 --case-time-limit 240 \
      --max-minutes "$MINUTES" --shard $i/2 --no-progress > $T/sweep_cpu.$i.log 2>&1 &
done
wait
python -m bayes_infer_ros.cli bench --merge benchmarks/sweep_engine_cpu.csv $T/sweep_cpu.0.csv $T/sweep_cpu.1.csv

# 4. Reports: summary tables, violins, params vs latency (the variant's list call, and the jitted program alone).
python -m bayes_infer_ros.cli report benchmarks/variants_engine_cpu.csv benchmarks/sweep_engine_cpu.csv --tag engine_cpu
python -m bayes_infer_ros.cli report benchmarks/variants_engine_cpu.csv benchmarks/sweep_engine_cpu.csv \
    --tag engine_cpu_core --metric core_median_s
