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
WARMUP_STAMP := install/.bayes_infer_ros-warmup
REQS := requirements/core.txt requirements/dev.txt requirements/ros-kilted.txt

.PHONY: help setup venv build warmup demo test check test-core test-gpu test-slow test-jazzy test-colcon bench bench-check clean
help:
	@echo "make demo   - run the agent on the default model (config/agent.yaml); sets up first if needed"
	@echo "make test   - run the whole test suite; sets up first if needed"
	@echo "make check  - the quick tier: the units without a ROS graph or a long compile (about a minute)"
	@echo "make setup  - idempotent: .venv with pinned deps, ROS 2 Kilted wheels, CMake fix-up, colcon build, warmup"
	@echo "make warmup - compile the kernels and fill the caches the node's first start reads (bayes-infer warmup)"
	@echo "make bench-check - the speed gate: call and tick ratios against benchmarks/bench_check_cpu.json"
	@echo "make test-gpu - fused_cuda's kernel tests on this machine's CUDA device (make test runs them in a simulator)"
	@echo "make test-jazzy  - the ROS tests on ROS 2 Jazzy (ros-jazzy-* wheels, Python 3.12) in .venv-jazzy/"
	@echo "make test-colcon - the suite through colcon test (ament_cmake_pytest) + colcon test-result"
	@echo "make test-aarch64 - fused_numba's oracle tests on AArch64 under qemu-user (.aarch64/; slow, not in CI)"

VENV_CLI := $(VENV)/bin/bayes-infer
setup: $(SETUP_STAMP) $(BUILD_STAMP) $(VENV_CLI) $(WARMUP_STAMP)

$(SETUP_STAMP): $(REQS) scripts/fix_ros_wheel_cmake.py scripts/ros_pip_deps.py
	@test -x $(PY) || $(PYTHON) -m venv $(if $(filter 1,$(USE_SYSTEM_ROS)),--system-site-packages) $(VENV)
	$(PY) -m pip install -q --upgrade "pip==25.3"
ifeq ($(USE_SYSTEM_ROS),0)
	$(PY) -m pip install -q -r requirements/dev.txt
	$(PY) -m pip install -q -r requirements/ros-kilted.txt
	$(PY) scripts/fix_ros_wheel_cmake.py
else
# A sourced ROS 2: only what the distro lacks, at versions for its Python, the distro's numpy kept
# (docs/system-ros.md; on Humble it refuses unless ROS_PIP_NUMPY_OVERLAY=1).
	$(PY) scripts/ros_pip_deps.py --write $(VENV)/ros-pip-deps.txt
	$(PY) -m pip install -q -r $(VENV)/ros-pip-deps.txt
endif
	touch $(VENV)/COLCON_IGNORE $@

# `bayes-infer` in the venv (colcon installs the same script into install/bayes_infer_ros/bin): the venv's
# Python runs it; the package itself comes from install/ once install/setup.bash is sourced.
$(VENV_CLI): scripts/bayes-infer | $(SETUP_STAMP)
	sed "1s|.*|#!$$(cd $(VENV) && pwd -P)/bin/python|" $< > $@ && chmod +x $@

# The ROS 2 wheels' ament index lies under the venv: ros-underlay/ (scripts/venv_ament_underlay.sh) makes the venv an
# underlay that colcon chains into install/setup.bash, so AMENT_PREFIX_PATH names it at run time. A sourced ROS 2
# needs none.
UNDERLAY := ros-underlay
UNDERLAY_STAMP := $(if $(filter 0,$(USE_SYSTEM_ROS)),$(UNDERLAY)/local_setup.sh)
PREFIX_ENV := $(if $(filter 0,$(USE_SYSTEM_ROS)),AMENT_PREFIX_PATH=$(abspath $(UNDERLAY)):$$VIRTUAL_ENV CMAKE_PREFIX_PATH=$$VIRTUAL_ENV)
$(UNDERLAY)/local_setup.sh: scripts/venv_ament_underlay.sh | $(SETUP_STAMP)
	bash scripts/venv_ament_underlay.sh $(UNDERLAY) $(VENV)

# --symlink-install links each installed file, so a new or removed file under these folders needs a rebuild
# (otherwise the installed package silently lacks it). The rebuild is incremental (a few seconds) and never
# removes install/ under a test run that is using it; `make clean` starts from scratch.
PKG_FILES := $(shell find bayes_infer_ros scripts config launch -type f ! -name '*.pyc' ! -path '*/__pycache__/*' 2>/dev/null)
$(BUILD_STAMP): $(SETUP_STAMP) $(UNDERLAY_STAMP) CMakeLists.txt package.xml setup.py $(wildcard msg/*.msg srv/*.srv) $(PKG_FILES)
	source $(VENV)/bin/activate && \
	  $(PREFIX_ENV) \
	  colcon --log-base log build --paths . --symlink-install --event-handlers console_direct- \
	  --cmake-args -DPython3_EXECUTABLE=$(abspath $(PY)) -DBUILD_TESTING=OFF -DBAYES_INFER_ROS_WARMUP=OFF
	touch $@

# The node's configure work once, after each build (the numba kernels and JAX programs of the shipped model into
# the per-user cache folders: bayes_infer_ros/node/warmup.py), so the node's first start is a warm start. A failure is a
# warning: the node then compiles at its first start.
$(WARMUP_STAMP): $(BUILD_STAMP) | $(VENV_CLI)
	$(RUN) bayes-infer warmup || echo "warning: bayes-infer warmup failed; the node's first start compiles instead"
	touch $@

warmup: $(BUILD_STAMP) | $(VENV_CLI)
	$(RUN) bayes-infer warmup

# Run a command inside the built workspace (venv + install/setup.bash).
RUN := source $(VENV)/bin/activate && source install/setup.bash &&

demo: setup
	$(RUN) python -m lab demo

# The suite in pytest-xdist workers (TEST_WORKERS, default 2; `--dist loadfile`: a module and its module-scoped
# fixtures stay in one worker). Each worker's compiled XLA programs are bounded by test/conftest.py, which clears
# JAX's caches after every module: one process that held all of the suite's programs (thousands) crashed inside an
# XLA:CPU compile (SIGSEGV/SIGABRT in backend_compile_and_load, near the kernel's vm.max_map_count).
# fused_numba's tests (marker `numba`) run in workers of their own (two runs with numba loaded beside the whole
# suite's XLA programs died in a later XLA compile). fused_cuda's kernel (marker `gpu_kernel`) runs in numba's CUDA
# simulator in a process of its own (NUMBA_ENABLE_CUDASIM must be set before numba loads; `make test-gpu` runs the
# same tests on the machine's CUDA device). The ROS graph tests claim a domain id per worker (test/ros/ros_harness.py).
# The suite's JAX programs compile with XLA's backend (LLVM) optimisation level 0, as a debug build does: the same
# HLO, held to the same tolerance table, in about two thirds of the compile time (test_fused_variants' fused_dense
# windows: 46 s -> 31 s). `make test-jazzy` does the same; the node, the benchmarks and CI's Python 3.10 step (the
# oracle tests on Jetson's JAX) run XLA's default; a set XLA_FLAGS wins.
TEST_WORKERS ?= 2
XDIST := -n $(TEST_WORKERS) --dist loadfile
TEST_XLA_FLAGS ?= --xla_backend_optimization_level=0
TEST_ENV := XLA_FLAGS="$${XLA_FLAGS:-$(TEST_XLA_FLAGS)}"
# The numba tests and the simulator's run side by side (each leaves a core idle at its end: a few long modules); the
# simulator's report follows the numba tests', and either failing fails the target.
SIM_LOG := log/test-cudasim.log
test: setup
	$(RUN) $(TEST_ENV) python -m pytest $(XDIST) -m "not slow and not numba and not gpu_kernel"
	@mkdir -p $(dir $(SIM_LOG))
	$(RUN) { $(TEST_ENV) NUMBA_ENABLE_CUDASIM=1 python -m pytest $(XDIST) -m "gpu_kernel and not slow" \
	    > $(SIM_LOG) 2>&1 & sim=$$!; \
	  $(TEST_ENV) python -m pytest $(XDIST) -m "numba and not slow"; numba=$$?; \
	  wait $$sim; simulated=$$?; echo "== fused_cuda's kernel in numba's CUDA simulator ($(SIM_LOG))"; \
	  cat $(SIM_LOG); exit $$(( numba || simulated )); }

# The quick tier: the units that need no ROS graph and no long compile (about a minute on 2 cores). test/ros (a ROS
# graph) is left out, and so is every test marked `heavy` (seconds each: engine builds, subprocesses, timed sweeps;
# test/inference's pymdp oracle sweeps among them: test/inference/conftest.py). `make test` runs all of them.
check: setup
	$(RUN) $(TEST_ENV) python -m pytest $(XDIST) -m "not slow and not heavy and not ros and not numba and not gpu_kernel" \
	  --ignore=test/ros

test-gpu: setup
	$(RUN) python -m pytest -m "gpu_kernel and not slow"

test-slow: setup
	$(RUN) python -m pytest -m slow

# ROS 2 Jazzy from the ros-jazzy-* wheels on Python 3.12 (its own venv and build/install folders).
test-jazzy:
	bash scripts/test_ros_jazzy.sh

# fused_numba's oracle tests and its AArch64 FPCR flush-to-zero path on arm64 Python under qemu-user (Debian's
# arm64 packages and PyPI's aarch64 wheels in .aarch64/, set up idempotently). Not in CI: see docs/jetson.md.
.PHONY: test-aarch64
test-aarch64:
	bash scripts/test_aarch64.sh

# The suite as a ROS workspace runs it: colcon test (ament_cmake_pytest, BUILD_TESTING=ON), then test-result.
test-colcon: setup
	source $(VENV)/bin/activate && \
	  $(PREFIX_ENV) \
	  colcon --log-base log-colcon build --paths . --build-base build-colcon --install-base install-colcon \
	  --symlink-install --event-handlers console_direct- \
	  --cmake-args -DPython3_EXECUTABLE=$(abspath $(PY)) -DBUILD_TESTING=ON && \
	  colcon --log-base log-colcon test --paths . --build-base build-colcon --install-base install-colcon \
	  --event-handlers console_direct- $(COLCON_TEST_ARGS); \
	  colcon test-result --test-result-base build-colcon --verbose

bench: setup
	$(RUN) python -m lab bench-variants

# The speed gate (CI runs it after the tests): the calls' and the node's tick's ratios to their bare kernels, and
# fused_numba's to pymdp's, measured side by side, against benchmarks/bench_check_cpu.json (benchmarks/README.md,
# "The speed gate"). About a minute; exits 1 with the figures when a ratio got more than 25% worse.
bench-check: setup
	$(RUN) python -m lab bench-check

clean:
	rm -rf build install log $(UNDERLAY)
