#!/usr/bin/env bash
# fused_numba's oracle tests (`pytest -m numba`: the kernels against pymdp 1.0.4) on AArch64, emulated by qemu-user
# on an x86-64 Debian/Ubuntu host: Debian bookworm's arm64 Python 3.11 in a directory (debootstrap's first stage,
# no chroot, no binfmt_misc needed: qemu-aarch64-static -L <root> runs it) and PyPI's aarch64 wheels (numpy, jax,
# jaxlib, numba, llvmlite, pymdp, pytest) at the versions of requirements/, installed with the host's pip into a
# target folder. Also runs test/inference/native/test_fp_mode.py, which checks the kernels take the AArch64 FPCR path.
#
#   bash scripts/test_aarch64.sh [pytest args]      # or: make test-aarch64
#
# Idempotent: everything lives under .aarch64/ (git-ignored); each step is skipped when its stamp is current.
# Needs qemu-user-static and debootstrap (installed with apt-get when missing and run as root), and network access
# to deb.debian.org and PyPI for the first run. Slow: see docs/jetson.md for the time it takes.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=.aarch64
ROOT=$DIR/rootfs
SITE=$DIR/site
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
HOST_PY=${PYTHON:-python3}
[ -x .venv/bin/python ] && HOST_PY=${PYTHON:-.venv/bin/python}

if ! command -v qemu-aarch64-static >/dev/null || ! command -v debootstrap >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q qemu-user-static debootstrap
  else
    echo "test_aarch64: needs qemu-user-static and debootstrap: sudo apt-get install qemu-user-static debootstrap" >&2
    exit 1
  fi
fi
mkdir -p "$DIR"

# 1. Debian bookworm arm64's Python 3.11: debootstrap downloads it with its dependencies (first stage only, which
#    needs no arm64 execution), then every downloaded package is unpacked into the root.
if [ ! -f "$ROOT/.unpacked" ]; then
  rm -rf "$ROOT"
  debootstrap --arch=arm64 --foreign --variant=minbase \
    --include=python3.11,libpython3.11-stdlib,zlib1g,libstdc++6,libgcc-s1 bookworm "$ROOT" "$MIRROR"
  for deb in "$ROOT"/var/cache/apt/archives/*.deb; do dpkg-deb -x "$deb" "$ROOT"; done
  touch "$ROOT/.unpacked"
fi
PY=("qemu-aarch64-static" "-L" "$ROOT" "$ROOT/usr/bin/python3.11")

# 2. aarch64 wheels at the pinned versions (requirements/core.txt + dev.txt's pymdp, numba, pytest).
REQS=$DIR/requirements.txt
{ grep -hE '^(numpy|jax|jaxlib|pyyaml)==' requirements/core.txt
  grep -hE '^(inferactively-pymdp|numba|llvmlite|pytest|pytest-timeout)==' requirements/dev.txt; } > "$REQS.new"
mv "$REQS.new" "$REQS"
stamp=$SITE/.installed-$(sha1sum "$REQS" | cut -c1-12)
if [ ! -f "$stamp" ]; then
  rm -rf "$SITE"
  "$HOST_PY" -m pip install -q --target "$SITE" --only-binary=:all: \
    --platform manylinux2014_aarch64 --platform manylinux_2_17_aarch64 --platform manylinux_2_27_aarch64 \
    --platform manylinux_2_28_aarch64 --python-version 3.11 --implementation cp --abi cp311 --abi abi3 --abi none \
    -r "$REQS"
  touch "$stamp"
fi

# 3. The tests, on AArch64. numba's cache goes to .aarch64/ (never the worktree's __pycache__).
export PYTHONPATH="$PWD/$SITE:$PWD" PYTHONDONTWRITEBYTECODE=1 NUMBA_CACHE_DIR="$PWD/$DIR/numba-cache" \
  JAX_PLATFORMS=cpu XLA_PYTHON_CLIENT_PREALLOCATE=false
"${PY[@]}" -c 'import platform, numba, jax, numpy; print(f"== {platform.machine()} under qemu-user: Python",
  platform.python_version(), "numpy", numpy.__version__, "jax", jax.__version__, "numba", numba.__version__)'
start=$(date +%s)
"${PY[@]}" -m pytest -p no:cacheprovider -m "numba and not slow" -rA \
  test/inference/native/test_fp_mode.py test/inference/test_fused_variants.py test/inference/test_belief_filter.py "$@"
echo "test-aarch64: the tests took $(( $(date +%s) - start )) s under emulation"
