#!/usr/bin/env bash
# An underlay folder for a venv that holds the ROS 2 wheels, as /opt/ros/<distro> is one: its local_setup.{sh,bash,zsh}
# put the venv on AMENT_PREFIX_PATH. colcon chains it into the setup files of a workspace built with the folder on
# AMENT_PREFIX_PATH (`make setup` builds so), so the ament index lists the wheels' packages at run time (the sensor
# adapters check a message type there). Usage: venv_ament_underlay.sh UNDERLAY_DIR VENV
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
