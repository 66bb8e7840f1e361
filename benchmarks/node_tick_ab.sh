#!/usr/bin/env bash
# The node's tick at two (or more) revisions of the package, or with other parameters, round-robin: `make demo`'s
# replay of the sample bag into the agent node (config/agent.yaml, event-driven ticks on sim time, evidence on), its
# median and p99 Beliefs.inference_ms, ROUNDS rounds of A then B then A ... in the same venv.
#
#   bash benchmarks/node_tick_ab.sh ROUNDS REV_A REV_B > benchmarks/node_tick_ab_cpu.txt
#   bash benchmarks/node_tick_ab.sh ROUNDS HEAD HEAD:evidence=false > benchmarks/node_evidence_ab_cpu.txt
#
# A candidate is REV or REV:NAME=VALUE[,NAME=VALUE...] (node parameters, `python -m lab demo --set`). Each revision
# is checked out into its own worktree under ${TMPDIR:-/tmp}, built there against this checkout's .venv (colcon, no
# pip), and run with the same HOME caches; the load average is printed before each run.
set -euo pipefail
rounds=$1
shift
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=$repo/.venv
trees=()
sets=()
for candidate in "$@"; do
  rev=${candidate%%:*}
  overrides=""
  [[ $candidate == *:* ]] && overrides=${candidate#*:}
  dir=${TMPDIR:-/tmp}/node_tick_ab_$(git -C "$repo" rev-parse --short "$rev")
  if [ ! -d "$dir" ]; then
    git -C "$repo" worktree add -q --detach "$dir" "$rev"
    ln -s "$venv" "$dir/.venv"
  fi
  make -C "$dir" -o .venv/.bayes_infer_ros-setup setup > /dev/null
  trees+=("$dir")
  sets+=("$overrides")
done
echo "# bash benchmarks/node_tick_ab.sh $rounds $*  ($(uname -m), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ))"
for ((r = 1; r <= rounds; r++)); do
  for i in "${!trees[@]}"; do
    dir=${trees[$i]}
    args=()
    IFS=, read -ra pairs <<< "${sets[$i]}"
    for pair in "${pairs[@]}"; do args+=(--set "$pair"); done
    load=$(cut -d' ' -f1 /proc/loadavg)
    line=$(cd "$dir" && set +u && source .venv/bin/activate && source install/setup.bash && python -m lab demo --no-live \
      "${args[@]}" 2>&1 | grep "inference per tick" || echo "inference per tick    (no result)")
    echo "round $r  $(git -C "$dir" rev-parse --short HEAD)${sets[$i]:+ ${sets[$i]}}  load $load  ${line#inference per tick    }"
  done
done
