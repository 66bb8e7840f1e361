#!/usr/bin/env bash
# Core tests on Python 3.10 (Jetson / ROS 2 Humble) with the jax/numpy that resolve there.
# Builds .venv310/ once (pyenv's 3.10, or PYTHON310=/path/to/python3.10) and runs the ROS-free tests.
set -euo pipefail
cd "$(dirname "$0")/.."
# A candidate counts only if it runs and is 3.10 (a pyenv shim named python3.10 exists even when pyenv would
# refuse to run it).
PY310=""
for c in ${PYTHON310:-} python3.10 /root/.pyenv/versions/3.10*/bin/python /usr/bin/python3.10; do
  if "$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 10))' 2>/dev/null; then PY310="$c"; break; fi
done
if [ -z "$PY310" ]; then
  echo "Python 3.10 not found (set PYTHON310); cannot run the 3.10 core tests" >&2
  exit 1
fi
stamp=.venv310/.installed-$(sha1sum requirements/py310.txt | cut -c1-12)
if [ ! -f "$stamp" ]; then
  rm -rf .venv310
  "$PY310" -m venv .venv310
  .venv310/bin/python -m pip install -q -r requirements/py310.txt
  touch "$stamp"
fi
echo "== core tests on $(.venv310/bin/python --version), jax $(.venv310/bin/python -c 'import jax; print(jax.__version__)')"
JAX_PLATFORMS=cpu PYTHONPATH="$PWD" .venv310/bin/python -m pytest -p no:cacheprovider -q -n "${TEST_WORKERS:-2}" --dist loadfile \
  test/model test/test_core_without_ros.py test/inference/test_baseline_vs_pymdp.py
