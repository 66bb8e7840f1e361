#!/usr/bin/env bash
# The GPU benchmarks, as run on a lent H100 (see benchmarks/README.md): the variants benchmark (pymdp and every
# variant in one run, time-boxed), the default model's kernels per tick under Nsight Compute, and a round-robin
# latency table of the default model. Writes under ${OUT:-benchmarks/gpu_out}.
# Needs jax with CUDA, pymdp 1.0.4 and (for fused_numba, a host-CPU variant) numba.
# STEPS (default "profile latency bench") picks the steps; each fits one 10-minute device call. The paper's scale in
# one device call (python -m lab scale: the M = 25 and M = 125 configurations above 1e5 parameters, pymdp, the merged
# variants, fused_cuda and auto on the GPU, fused_numba on the host CPU, round-robin per configuration and algorithm;
# compiles, timings, summary, plots and crossover table in at most SCALE_MINUTES, default 8) is
#   OUT=$OUT STEPS=scale bash benchmarks/run_gpu.sh       # 8 files under $OUT: *_scale_<device>.*
# The older two-call sweep of the same strata is
#   STEPS="latency warm sweep report agents" bash benchmarks/run_gpu.sh      # rerun "sweep" to resume
# IDS overrides the configurations, AGENT_ARGS the agents step's options. The CPU check of the steps (JAX on the CPU,
# fused_cuda in numba's CUDA simulator; not GPU results):
#   OUT=/tmp/gpu_check JAX_PLATFORMS=cpu NUMBA_ENABLE_CUDASIM=1 IDS=c0049 MINUTES=2 STEPS="warm sweep report agents" \
#     AGENT_ARGS="--b 1 4 --rounds 5 --max-seconds 5 --jax-variants fused_pairwise" bash benchmarks/run_gpu.sh
set -uo pipefail
OUT=${OUT:-benchmarks/gpu_out}
MINUTES=${MINUTES:-8}
mkdir -p "$OUT"
export JAX_PLATFORMS=${JAX_PLATFORMS:-cuda,cpu} XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1 PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || echo "no nvidia-smi (CPU check)"
uptime
python3 -c "import jax; from importlib.metadata import version as v; print(*(f'{p} {v(p)}' for p in ('jax', 'jaxlib', \
'numba', 'inferactively-pymdp')), 'devices', jax.devices())"
dev=$(python3 -c "from lab.variants_benchmark import device_tag; print(device_tag())")
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
timeout "${LATENCY_SECONDS:-300}" python3 benchmarks/gpu_ticks.py time --variants ${LATENCY_VARIANTS:-baseline hybrid \
    hybrid_block end_to_end fused_dense fused_pairwise fused_numba fused_cuda} --rounds 20 2>&1 \
    | tee "$OUT/default_model_latency_$dev.txt"
fi
if [[ " $STEPS " == *" bench "* ]]; then
# 3. the variants benchmark, time-boxed (resumable: rerun to extend)
timeout $(( MINUTES * 60 + 240 )) python3 -m lab bench-variants --out "$OUT/variants_$dev.csv" \
    --max-minutes "$MINUTES" --no-progress --rounds 30 --max-time 1.0 2>&1 | tail -40
fi
# 4. The paper's scale: one configuration of every M = 25 and M = 125 stratum (the CPU sweeps' choices), the largest
#    first, pymdp, the VARIANTS (fused_cuda refuses models over one block's shared memory) and `auto` (the node's
#    device and variant decision) on the GPU, fused_numba on the host CPU, timed round-robin per (configuration,
#    algorithm); time-boxed and resumable.
#    "warm" first compiles every case in parallel processes (one per configuration and algorithm, their timings
#    thrown away) into JAX's persistent compilation cache, so the timed "sweep", one process on an otherwise idle
#    machine, loads its programs instead of compiling them.
IDS=${IDS:-c0704 c0510 c0571 c0722 c0284 c0193 c0247 c0459 c0677 c0308 c0559 c0823 c0877 c0788}
VARIANTS=${VARIANTS:-baseline fused_dense fused_pairwise end_to_end hybrid_block fused_cuda fused_numba auto}
export JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-/tmp/bayes_gpu_cache/jax} \
  JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=0 \
  NUMBA_CACHE_DIR=${NUMBA_CACHE_DIR:-/tmp/bayes_gpu_cache/numba}
BENCH=(python3 -m lab bench --cache .cache/pomdp_configs --no-packed --no-progress --variants $VARIANTS)
if [[ " $STEPS " == *" warm "* || " $STEPS " == *" sweep "* ]]; then
  python3 -m lab generate --out .cache/pomdp_configs --index-only > /dev/null
fi
if [[ " $STEPS " == *" warm "* ]]; then
  t0=$(date +%s)
  export WARM_SECONDS=${WARM_SECONDS:-200}
  # one process per (configuration, algorithm), at most WARM_JOBS at once (each holds a CUDA context), all in a
  # process group of their own: at the deadline the whole group (the jobs' spawned workers too) is killed, so
  # nothing still compiling runs beside the timed sweep
  export VARIANTS IDS
  setsid bash -c 'for id in $IDS; do for alg in mmp vmp fpi; do echo "$id $alg"; done; done \
    | xargs -P "${WARM_JOBS:-16}" -n 2 bash -c '"'"'python3 -m lab bench --cache .cache/pomdp_configs --no-packed \
        --no-progress --variants $VARIANTS --ids "$0" --algorithms "$1" --out "/tmp/warm_$0_$1.csv" --rounds 1 \
        --max-time 0.01 --case-time-limit "$WARM_SECONDS" > "/tmp/warm_$0_$1.log" 2>&1; true'"'"'' &
  warm_group=$!  # setsid's process: the new group's id
  ( sleep "$WARM_SECONDS"; kill -9 -- "-$warm_group" 2>/dev/null ) & watchdog=$!
  wait "$warm_group" 2>/dev/null
  kill "$watchdog" 2>/dev/null; kill -9 -- "-$warm_group" 2>/dev/null  # a spawned worker left behind
  echo "warm: $(( $(date +%s) - t0 )) s, cache $(du -sh "$JAX_COMPILATION_CACHE_DIR" | cut -f1)"
  cat /tmp/warm_*.csv 2>/dev/null | cut -d, -f1,5,6,9 | grep -v ",ok$" | grep -v "^config_id" | sort | uniq | head -40
fi
if [[ " $STEPS " == *" sweep "* ]]; then
  uptime
  ps -eo pid,pcpu,etime,comm --sort=-pcpu | head -6  # what else runs (the 1-minute load average lags)
  timeout "${SWEEP_SECONDS:-$(( MINUTES * 60 + 120 ))}" "${BENCH[@]}" --ids $IDS --out "$OUT/sweep_$dev.csv" --rounds 30 \
      --max-time "${MAX_TIME:-1}" --case-time-limit 60 --max-minutes "$MINUTES" 2>&1 | tail -5
  uptime
fi
if [[ " $STEPS " == *" report "* ]]; then
# 5. Summary, violins and params-vs-latency of the sweep; the GPU / host CPU table and the crossover per algorithm
python3 -m lab report "$OUT/sweep_$dev.csv" --tag "$dev" --out-dir "$OUT"
python3 benchmarks/gpu_crossover.py "$OUT/sweep_$dev.csv" | tee "$OUT/crossover_$dev.md"
fi
if [[ " $STEPS " == *" scale "* ]]; then
# 7. The paper's scale in one call: every phase under one deadline (lab/scale.py); numpy >= 2.5 gets numpy.row_stack
#    back for numba-cuda through lab/numpy_compat/sitecustomize.py on every process's PYTHONPATH (lab scale adds it)
  timeout -k 10 $(( ${SCALE_MINUTES:-8} * 60 + 60 )) python3 -m lab scale --out-dir "$OUT" --tag "scale_$dev" \
      --minutes "${SCALE_MINUTES:-8}" --work-dir /tmp/bayes_scale ${SCALE_ARGS:-}
fi
if [[ " $STEPS " == *" agents "* ]]; then
# 6. Many agents in one call: agent-ticks per second of the default model, b = 1 .. 10000, host CPU and GPU
timeout "${AGENT_SECONDS:-540}" python3 benchmarks/agents_throughput.py --gpu --out "$OUT/agents_throughput_$dev.csv" ${AGENT_ARGS:---max-seconds 240} \
    2>&1 | tail -40 | tee "$OUT/agents_throughput_$dev.txt"
fi
