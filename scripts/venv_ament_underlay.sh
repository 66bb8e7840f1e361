#!/usr/bin/env bash
# Writes UNDERLAY_DIR/local_setup.{sh,bash,zsh} that put VENV (the ROS 2 PyPI wheels' prefix) on AMENT_PREFIX_PATH,
# so colcon chains it into install/setup.bash as it chains /opt/ros/<distro> (`make setup`; idempotent: the same files
# each run, and sourcing them twice adds the venv once). Usage: venv_ament_underlay.sh UNDERLAY_DIR VENV
set -euo pipefail
mkdir -p "$1"
venv=$(cd "$2" && pwd -P)
for shell in sh bash zsh; do
  cat > "$1/local_setup.$shell" <<SETUP
# written by bayes_infer_ros's make setup (scripts/venv_ament_underlay.sh): the ROS 2 wheels' prefix, last on
# AMENT_PREFIX_PATH (an underlay)
case ":\${AMENT_PREFIX_PATH:-}:" in
  *":$venv:"*) ;;
  *) export AMENT_PREFIX_PATH="\${AMENT_PREFIX_PATH:+\${AMENT_PREFIX_PATH}:}$venv" ;;
esac
SETUP
done
