# Single entry point. Newcomers need two commands: `make demo` and `make test` (each runs setup first).
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# With a system ROS 2 sourced (ROS_DISTRO set), the venv sees its rclpy and the PyPI wheels are skipped.
# Force either way with USE_SYSTEM_ROS=1 / USE_SYSTEM_ROS=0.
USE_SYSTEM_ROS ?= $(if $(ROS_DISTRO),1,0)
# Every rclpy process stays on loopback; tests pick their own ROS_DOMAIN_ID per run.
export ROS_AUTOMATIC_DISCOVERY_RANGE := LOCALHOST
export ROS_LOCALHOST_ONLY := 1
export RMW_IMPLEMENTATION ?= rmw_fastrtps_cpp
export JAX_PLATFORMS ?= cpu
export XLA_PYTHON_CLIENT_PREALLOCATE ?= false

SETUP_STAMP := $(VENV)/.bayes_infer_ros-setup
BUILD_STAMP := install/.bayes_infer_ros-build
REQS := requirements/core.txt requirements/dev.txt requirements/ros-kilted.txt

.PHONY: help setup venv build demo test test-core test-slow bench clean
help:
	@echo "make demo   - run the agent on the default model (config/agent.yaml); sets up first if needed"
	@echo "make test   - run the whole test suite; sets up first if needed"
	@echo "make setup  - idempotent: .venv with pinned deps, ROS 2 Kilted wheels, CMake fix-up, colcon build"

VENV_CLI := $(VENV)/bin/bayes-infer
setup: $(SETUP_STAMP) $(BUILD_STAMP) $(VENV_CLI)

$(SETUP_STAMP): $(REQS) scripts/fix_ros_wheel_cmake.py
	@test -x $(PY) || $(PYTHON) -m venv $(if $(filter 1,$(USE_SYSTEM_ROS)),--system-site-packages) $(VENV)
	$(PY) -m pip install -q --upgrade "pip==25.3"
	$(PY) -m pip install -q -r requirements/dev.txt
ifeq ($(USE_SYSTEM_ROS),0)
	$(PY) -m pip install -q -r requirements/ros-kilted.txt
	$(PY) scripts/fix_ros_wheel_cmake.py
endif
	touch $(VENV)/COLCON_IGNORE $@

# `bayes-infer` in the venv (colcon installs the same script into install/bayes_infer_ros/bin): the venv's
# Python runs it; the package itself comes from install/ once install/setup.bash is sourced.
$(VENV_CLI): scripts/bayes-infer | $(SETUP_STAMP)
	sed "1s|.*|#!$$(cd $(VENV) && pwd -P)/bin/python|" $< > $@ && chmod +x $@

# --symlink-install links each installed file, so a new or removed file under these folders needs a rebuild
# (otherwise the installed package silently lacks it). The rebuild is incremental (a few seconds) and never
# removes install/ under a test run that is using it; `make clean` starts from scratch.
PKG_FILES := $(shell find bayes_infer_ros scripts config launch -type f ! -name '*.pyc' ! -path '*/__pycache__/*' 2>/dev/null)
$(BUILD_STAMP): $(SETUP_STAMP) CMakeLists.txt package.xml setup.py $(wildcard msg/*.msg srv/*.srv) $(PKG_FILES)
	source $(VENV)/bin/activate && \
	  $(if $(filter 0,$(USE_SYSTEM_ROS)),AMENT_PREFIX_PATH=$$VIRTUAL_ENV CMAKE_PREFIX_PATH=$$VIRTUAL_ENV) \
	  colcon --log-base log build --paths . --symlink-install --event-handlers console_direct- \
	  --cmake-args -DPython3_EXECUTABLE=$(abspath $(PY)) -DBUILD_TESTING=OFF
	touch $@

# Run a command inside the built workspace (venv + install/setup.bash).
RUN := source $(VENV)/bin/activate && source install/setup.bash &&

demo: setup
	$(RUN) python -m bayes_infer_ros.cli demo

test: setup
	$(RUN) python -m pytest

test-slow: setup
	$(RUN) python -m pytest -m slow

bench: setup
	$(RUN) python -m bayes_infer_ros.cli bench-variants

clean:
	rm -rf build install log
