#!/usr/bin/env bash
# The message packages under test/interfaces/ that this environment lacks (test/interfaces/README.md: vision_msgs,
# nav_msgs), built into install-test-interfaces/ (colcon's build files in build-test-interfaces/). A package that
# AMENT_PREFIX_PATH already lists (a sourced ROS 2, a wheel) is not built. Idempotent: colcon rebuilds what changed.
# `make setup` runs it with the environment active and the prefix paths set, before the package's own build, which
# chains install-test-interfaces/ into install/setup.bash.
set -euo pipefail
cd "$(dirname "$0")/.."
here="$PWD/install-test-interfaces"
installed() {  # is package $1 in the ament index of a prefix on AMENT_PREFIX_PATH (other than ours)?
  local prefix
  IFS=: read -ra prefixes <<< "${AMENT_PREFIX_PATH:-}"
  for prefix in "${prefixes[@]}"; do
    case "$prefix" in "" | "$here"/*) continue ;; esac
    [ -e "$prefix/share/ament_index/resource_index/packages/$1" ] && return 0
  done
  return 1
}
paths=()
for dir in test/interfaces/*/; do
  pkg=$(basename "$dir")
  if installed "$pkg"; then
    echo "test interfaces: $pkg is installed already; not building it"
  else
    paths+=("$dir")
  fi
done
mkdir -p "$here"
if [ ${#paths[@]} -gt 0 ]; then
  colcon --log-base log build --paths "${paths[@]}" --build-base build-test-interfaces --install-base "$here" \
    --event-handlers console_direct- \
    --cmake-args -DBUILD_TESTING=OFF -DPython3_EXECUTABLE="$(command -v python3)"
fi
