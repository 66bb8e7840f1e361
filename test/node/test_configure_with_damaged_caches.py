"""variant auto keeps fused_numba when a kept decision record and numba's kernel indexes are
damaged; each damaged file is named in one WARN."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from configure_probe import REPO, configure, only


@pytest.mark.numba
def test_configure_with_a_damaged_decision_record_and_kernel_index_keeps_fused_numba(tmp_path):
    """A kept decision whose timings are a list and kernel indexes whose pickle protocol byte is damaged.
    ``variant: auto`` still starts fused_numba, its candidates to verify again; ``variant: fused_numba``
    configures. Each damaged file is named in one WARN, and nothing else warns."""
    import yaml

    env = {"HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": "", "NUMBA_CACHE_DIR": "",
           "BAYES_INFER_DECISION_CACHE": ""}
    caches = tmp_path / "home" / ".cache" / "bayes_infer_ros"
    # warmup keeps the verified decision (the node's configure starts fused_numba and verifies in the background)
    proc = subprocess.run([sys.executable, "-m", "bayes_infer_ros.cli", "warmup"],
                          env={**os.environ, "JAX_PLATFORMS": "cpu", **env}, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0 and "WARNING" not in proc.stderr, proc.stdout[-2000:] + proc.stderr[-2000:]

    def damage_indexes() -> list[Path]:
        indexes = sorted((caches / "numba").rglob("*.nbi"))
        assert indexes
        for index in indexes:
            data = bytearray(index.read_bytes())
            data[1] = 99  # pickle's protocol byte: "unsupported pickle protocol: 99"
            index.write_bytes(bytes(data))
        return indexes

    [record] = (caches / "decisions").glob("*.json")
    record.write_text(json.dumps({**json.loads(record.read_text()), "timings": [1, 2]}))
    damaged = damage_indexes()
    result, warns, out = configure(env)
    assert result["variant"] == "fused_numba", out[-3000:]
    assert len(only(warns, str(record))) == 1, warns
    assert all(any(str(p) in w for p in damaged + [record]) for w in warns), warns
    assert len(warns) == len(set(warns)) and len(warns) > 1, warns

    doc = yaml.safe_load((REPO / "config" / "agent.yaml").read_text())
    doc["/**"]["ros__parameters"]["variant"] = "fused_numba"
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(doc))
    damaged = damage_indexes()
    result, warns, out = configure(env, params=params)
    assert result["variant"] == "fused_numba", out[-3000:]
    assert warns and all(any(str(p) in w for p in damaged) for w in warns), warns
