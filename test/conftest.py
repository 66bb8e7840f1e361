"""Shared fixtures. JAX runs on the CPU in tests unless the caller says otherwise."""
import os
import sys
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
# Every verify step times its candidates (the kept-decision cache is tested with its own folders): a test never
# depends on what an earlier run left in the user's cache.
os.environ.setdefault("BAYES_INFER_DECISION_CACHE", "off")
sys.path.insert(0, str(Path(__file__).parent))  # tolerances.py, oracle.py, synthetic_rows.py
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # the lab (not installed): lab.harness, lab.pymdp_oracle, ...

import contextlib  # noqa: E402

import jax  # noqa: E402
import pytest  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]


def enable_x64():
    """Context manager enabling float64 in JAX (API differs across the jax versions we support)."""
    if hasattr(jax, "enable_x64"):
        return jax.enable_x64(True)
    from jax.experimental import enable_x64 as _enable  # jax < 0.5 (Python 3.10 / Jetson)

    return _enable()


@pytest.fixture
def x64():
    with enable_x64():
        yield


@pytest.fixture(scope="module", autouse=True)
def _release_compiled_programs():
    """Drop JAX's compiled executables after each test module. Every XLA:CPU executable keeps its own memory
    mappings; a single pytest process that holds all of the suite's programs (several thousand) approaches the
    kernel's vm.max_map_count (65530), and XLA then aborts or crashes inside a compile."""
    yield
    import gc

    jax.clear_caches()
    gc.collect()


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


__all__ = ["enable_x64", "contextlib"]


@pytest.fixture(autouse=True)
def _no_cache_warnings_forwarded_after_the_test():
    """The node forwards the cache modules' warnings to the newest node's logger, a setting of the whole process: it
    is reset after each test, so that a test's stand-in logger never receives a later test's warnings."""
    yield
    from bayes_infer_ros.node.reporting import forward_cache_warnings

    forward_cache_warnings(None)
