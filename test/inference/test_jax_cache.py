"""inference/jax_cache.py: the JAX compilation cache kept under its cap (least recently used entries first, nothing
else in the folder touched)."""
from __future__ import annotations

import os
import time

from bayes_infer_ros.inference.jax_cache import cache_bytes, prune


def test_prune_keeps_the_cache_under_its_cap(tmp_path):
    now = time.time()
    for k in range(10):
        p = tmp_path / f"jit_f-{k:04d}-cache"
        p.write_bytes(b"x" * 1000)
        os.utime(p, (now - 100 + k, now - 100 + k))  # entry 0 least recently used
    (tmp_path / "jit_f-0009-atime").write_bytes(b"t" * 10)
    (tmp_path / "notes.txt").write_bytes(b"y" * 5000)  # not a cache entry: never touched
    assert cache_bytes(tmp_path) == 10_010
    removed, freed = prune(tmp_path, 4500)
    assert (removed, freed) == (6, 6000) and cache_bytes(tmp_path) <= 4500
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["jit_f-0006-cache", "jit_f-0007-cache", "jit_f-0008-cache", "jit_f-0009-atime",
                    "jit_f-0009-cache", "notes.txt"]
    assert prune(tmp_path / "missing", 1) == (0, 0)
