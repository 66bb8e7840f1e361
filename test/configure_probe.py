"""The node's configure in a fresh process, for the tests of hostile caches (``test/test_caches.py``,
``test/node/test_configure_with_*_caches.py``): numba's kernels and JAX's cache are set up once per process, so each
configure is a subprocess whose log lines come back as text."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# The node's configure work in a fresh process, its log lines on stdout ("WARN ..."), then one JSON line.
CONFIGURE = textwrap.dedent("""
    import json, sys
    from bayes_infer_ros.model.io import read_parameters_yaml
    from bayes_infer_ros.node.parameters import PARAMETERS
    from bayes_infer_ros.node.runtime import AgentRuntime
    from bayes_infer_ros.node.settings import NodeSettings

    class Log:
        def info(self, m): print("INFO", m, flush=True)
        def warning(self, m): print("WARN", m, flush=True)
        def error(self, m): print("ERROR", m, flush=True)

    values = {s.name: s.default for s in PARAMETERS}
    values.update(read_parameters_yaml(sys.argv[1]))
    settings = NodeSettings.from_values(values)
    runtime = AgentRuntime(settings, Log(), lambda: 0, lambda: False, lambda *a: None)
    slot = runtime.configure(settings, 0.5, lambda: True, lambda back: None)
    runtime.cleanup("probe done")
    print(json.dumps({"variant": slot.variant, "note": slot.note}))
""")

# A disk that fills after the folders were checked: every numba cache file (.nbi/.nbc, wherever numba keeps them)
# and JAX cache entry (<key>-cache under HOME) refuses to be written.
FULL_DISK = textwrap.dedent("""
    import builtins, errno, io, os
    _open = io.open
    def full(file, mode="r", *args, **kwargs):
        name = os.fspath(file) if isinstance(file, (str, bytes, os.PathLike)) else ""
        if isinstance(name, str) and any(c in mode for c in "wax") and (
                ".nb" in name or (name.startswith(os.environ["HOME"]) and name.endswith("-cache"))):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), name)
        return _open(file, mode, *args, **kwargs)
    builtins.open = io.open = full
""")


def configure(env: dict, prelude: str = "", params: Path = REPO / "config" / "agent.yaml") -> tuple[dict, list[str], str]:
    """(result, WARN lines, whole output) of one configure with the shipped model (``params``) in a fresh process."""
    full_env = {**os.environ, "JAX_PLATFORMS": "cpu", **env}
    proc = subprocess.run([sys.executable, "-c", prelude + CONFIGURE, str(params)],
                          env=full_env, capture_output=True, text=True, timeout=1800)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return result, [line for line in proc.stdout.splitlines() if line.startswith("WARN")], out


def only(lines: list[str], needle: str) -> list[str]:
    return [line for line in lines if needle in line]
