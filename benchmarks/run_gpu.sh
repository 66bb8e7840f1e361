#!/usr/bin/env bash
# The GPU benchmarks, as run on a lent H100 (see benchmarks/README.md): the variants benchmark (pymdp and every
# variant in one run, time-boxed), the default model's kernels per tick under Nsight Compute, and a round-robin
# latency table of the default model. Writes under ${OUT:-benchmarks/gpu_out}.
# Needs jax with CUDA, pymdp 1.0.4 and (for fused_numba, a host-CPU variant) numba.
# STEPS (default "profile latency bench") picks the steps; each fits one 10-minute device call.
set -uo pipefail
OUT=${OUT:-benchmarks/gpu_out}
MINUTES=${MINUTES:-8}
mkdir -p "$OUT"
export JAX_PLATFORMS=cuda XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1 PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
dev=$(python3 -c "from bayes_infer_ros.bench.variants_benchmark import device_tag; print(device_tag())")
echo "device tag: $dev"
STEPS=${STEPS:-profile latency bench}
if [[ " $STEPS " == *" profile "* ]]; then
# 1. kernels per tick: counted by Nsight Compute for fpi (one node tick between cudaProfilerStart/Stop; ncu
#    crashed on the VMP/MMP programs here), and read off the compiled HLO for every algorithm
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
: > "$OUT/kernels_per_tick.txt"
for v in pymdp baseline fused_dense fused_pairwise; do
  timeout -k 5 60 "$NCU" --profile-from-start off --csv --metrics gpu__time_duration.sum \
      python3 benchmarks/gpu_ticks.py profile --algorithm fpi --variant $v > /tmp/ncu_$v.csv 2>/dev/null < /dev/null
  echo "ncu fpi $v kernels=$(grep -c 'gpu__time_duration.sum' /tmp/ncu_$v.csv)" | tee -a "$OUT/kernels_per_tick.txt"
done
timeout -k 5 120 python3 benchmarks/gpu_ticks.py hlo --variants baseline hybrid end_to_end fused_dense fused_pairwise \
    2>&1 | tee -a "$OUT/kernels_per_tick.txt"
fi
if [[ " $STEPS " == *" latency "* ]]; then
# 2. round-robin latency of the default model
timeout 300 python3 benchmarks/gpu_ticks.py time --variants baseline hybrid hybrid_block end_to_end fused_dense \
    fused_pairwise fused_numba --rounds 20 2>&1 | tee "$OUT/default_model_latency.txt"
fi
if [[ " $STEPS " == *" bench "* ]]; then
# 3. the variants benchmark, time-boxed (resumable: rerun to extend)
timeout $(( MINUTES * 60 + 240 )) python3 -m bayes_infer_ros.cli bench-variants --out "$OUT/variants_$dev.csv" \
    --max-minutes "$MINUTES" --no-progress --rounds 30 --max-time 1.0 2>&1 | tail -40
fi
