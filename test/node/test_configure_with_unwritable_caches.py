"""variant auto keeps fused_numba when the caches cannot be written: an unwritable HOME and
NUMBA_CACHE_DIR, and a disk that fills after the folders were checked; one WARN names each cache's setting."""
from __future__ import annotations

import pytest

from configure_probe import FULL_DISK, REPO, configure, only


@pytest.mark.numba
def test_configure_with_unwritable_caches_keeps_fused_numba_and_warns_once_per_cache(tmp_path):
    """A read-only HOME (here: HOME under a regular file) and an unwritable NUMBA_CACHE_DIR (/proc): configure
    succeeds, auto still picks fused_numba, one WARN names each cache's setting."""
    (tmp_path / "file").write_text("x")
    result, warns, out = configure({"HOME": str(tmp_path / "file" / "home"), "XDG_CACHE_HOME": "",
                                    "NUMBA_CACHE_DIR": "/proc/self/bayes_infer_ros_numba"})
    assert result["variant"] == "fused_numba", out[-3000:]
    assert len(only(warns, "jax_compilation_cache_dir")) == 1, warns
    assert len(only(warns, "NUMBA_CACHE_DIR")) == 1, warns
    assert len(warns) == 2, warns


@pytest.mark.numba
def test_configure_on_a_disk_that_fills_keeps_fused_numba_and_warns_once_per_cache(tmp_path):
    """Every numba and JAX cache write fails with ENOSPC after the folders were found writable. variant auto compiles
    no JAX program in the node (its verify step runs in a child process): numba's cache warns, JAX's has nothing to
    write; a JAX variant's configure warns once for JAX's."""
    import yaml

    env = {"HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": ""}
    result, warns, out = configure(env, prelude=FULL_DISK)
    assert result["variant"] == "fused_numba", out[-3000:]
    numba_warns = only(warns, "NUMBA_CACHE_DIR")
    assert len(numba_warns) == 1 and "disk is full" in numba_warns[0], warns
    assert only(warns, "jax_compilation_cache_dir") == [], warns
    doc = yaml.safe_load((REPO / "config" / "agent.yaml").read_text())
    doc["/**"]["ros__parameters"]["variant"] = "baseline"
    (tmp_path / "baseline.yaml").write_text(yaml.safe_dump(doc))
    result, warns, out = configure(env, prelude=FULL_DISK, params=tmp_path / "baseline.yaml")
    jax_warns = only(warns, "jax_compilation_cache_dir")
    assert result["variant"] == "baseline" and len(jax_warns) == 1 and "No space left" in jax_warns[0], warns
    assert "Error writing persistent compilation cache entry" not in out.replace(jax_warns[0], "")
