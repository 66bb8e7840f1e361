#!/usr/bin/env bash
# The node's inference_ms in `make demo` for several revisions of the package, round-robin: for each round, each
# revision's bayes_infer_ros/ is checked out into this working tree (the installed package links to it) and the
# demo runs once; the median inference_ms and end-to-end latency of each run are printed. Restores HEAD at the end.
#
#   bash benchmarks/archive/demo_ab.sh ROUNDS REV [REV ...]     e.g. bash benchmarks/archive/demo_ab.sh 4 04a2d31 HEAD
#
# Needs a clean bayes_infer_ros/ (it is overwritten), the ROS side set up (`make setup`) and a quiet machine.
set -eo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:?usage: demo_ab.sh ROUNDS REV [REV ...]}; shift
if ! git diff --quiet HEAD -- bayes_infer_ros; then
    echo "demo_ab: bayes_infer_ros/ has uncommitted changes; commit or stash them first" >&2; exit 2
fi
source .venv/bin/activate && source install/setup.bash
trap 'git checkout -q HEAD -- bayes_infer_ros' EXIT
echo "# $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cpus; rounds $rounds; revisions $*"
for r in $(seq "$rounds"); do
    for rev in "$@"; do
        git checkout -q "$rev" -- bayes_infer_ros
        line=$(python -m lab demo --no-live 2>&1 | grep -E 'inference per tick|end-to-end latency' |
               sed -E 's/ +/ /g' | tr '\n' ';')
        echo "round $r $(git rev-parse --short "$rev"): $line"
    done
done
