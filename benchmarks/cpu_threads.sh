#!/usr/bin/env bash
# XLA:CPU threads and process affinity, default model: each setting in its own process (XLA reads its flags
# once), the settings interleaved over REPEATS passes so load drift hits all alike; inside a process, pymdp,
# the JAX dispatch floor and each variant run round-robin (benchmarks/xla_cpu_modes.py).
# From the repository root, venv active:  bash benchmarks/cpu_threads.sh | tee benchmarks/cpu_threads_cpu.txt
set -uo pipefail
export JAX_PLATFORMS=cpu
REPEATS=${REPEATS:-2}
ROUNDS=${ROUNDS:-30}
ARGS="--rounds $ROUNDS --variants baseline fused_pairwise fused_numba"
for pass in $(seq "$REPEATS"); do
  echo "### pass $pass: default (every core, XLA's default thread pool)"
  python benchmarks/xla_cpu_modes.py $ARGS 2>&1 | grep -v "^I1"
  echo "### pass $pass: taskset -c 0 (one core from the start: XLA sizes its pool to it)"
  taskset -c 0 python benchmarks/xla_cpu_modes.py $ARGS 2>&1 | grep -v "^I1"
  echo "### pass $pass: pinned to core 0 after start (the node's cpu_affinity parameter)"
  python benchmarks/xla_cpu_modes.py $ARGS --pin-after-start 0 2>&1 | grep -v "^I1"
  echo "### pass $pass: JAX started from a thread restricted to core 0 (XLA's pool there, the caller free)"
  python benchmarks/xla_cpu_modes.py $ARGS --start-on 0 2>&1 | grep -v "^I1"
  echo "### pass $pass: XLA_FLAGS single-threaded Eigen"
  XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" \
    python benchmarks/xla_cpu_modes.py $ARGS 2>&1 | grep -v "^I1"
done
