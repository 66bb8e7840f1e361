"""Filling the caches the node's configure reads, so that the first start after an install is a warm start
(``bayes-infer warmup``: ``cli/warmup.py``).

:func:`warm` runs the node's configure steps itself (:meth:`~.runtime.AgentRuntime.configure`: JAX set-up with
``jax_compilation_cache_dir``, the model, the deployment of the start of ``variant: auto``), then its verify step, on
the parameters a params file gives the node (default: the installed ``config/agent.yaml``, the shipped model and the
node's defaults), in this process, without ROS. What it fills:

- numba's kernel cache (``inference.kernel_cache``): ``NUMBA_CACHE_DIR``, else ``$XDG_CACHE_HOME/bayes_infer_ros/numba``
  (default ``~/.cache/bayes_infer_ros/numba``);
- JAX's persistent compilation cache: ``jax_compilation_cache_dir`` (default ``~/.cache/bayes_infer_ros/jax``);
- the decision cache (``autotune.decision.DecisionCache``): where ``variant: auto`` has candidates to verify, warmup
  runs the verify step (in a child process, as the node does) and waits for it, so the node's first start runs the
  verified engine at once and verifies nothing;
- the policy kernel (``autotune.deployment.deploy_policy``): configure compiles it where the params turn policy
  inference on, and only there: warmup compiles what the configured node runs, no more.

Run it as the user, and with the environment (HOME, XDG_CACHE_HOME, NUMBA_CACHE_DIR), the node runs with: the
folders are per user. The install tree is never written. A cache folder that cannot be written is a WARNING (the
node then runs without that cache, too); a model or build error raises. ``make setup``, ``colcon build`` (CMakeLists.txt) and the container builds run it; a failure there is a warning.
"""
from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

from bayes_infer_ros.autotune.verification import VERIFY_TIMEOUT_S
from bayes_infer_ros.inference.kernel_cache import resolved_folder
from bayes_infer_ros.model.io import read_parameters_yaml
from .parameters import PARAMETERS
from .reporting import forward_cache_warnings
from .runtime import AgentRuntime
from .settings import NodeSettings

log = logging.getLogger("bayes_infer_ros.warmup")


def node_parameters(params_file: Path) -> dict[str, Any]:
    """The node's parameter values for ``params_file``: the table's defaults, then the file's ``/**`` section."""
    values = {spec.name: spec.default for spec in PARAMETERS}
    values.update(read_parameters_yaml(params_file))
    return values


def warm(params_file: Path) -> dict[str, Any]:
    """Configure once, as the node would with ``params_file``; returns what it built and where the caches are."""
    settings = NodeSettings.from_values(node_parameters(params_file))
    runtime = AgentRuntime(settings, log, lambda: 0, lambda: False, lambda *a: None)
    forward_cache_warnings(None)  # the cache modules' warnings reach the console once, through the root logger
    t0 = time.perf_counter()
    deployment = runtime.configure(settings, 0.5, lambda: True, lambda back: None)
    configure_s = time.perf_counter() - t0
    verified = ""
    job = runtime.verify()
    if job is not None:  # the node's verify step, waited for: its answer is kept in the decision cache
        outcome = job.wait(VERIFY_TIMEOUT_S)
        verified = outcome.reason if outcome is not None else f"the verify step did not end in {VERIFY_TIMEOUT_S:g} s"
    runtime.cleanup("warmup done")
    used, numba_folder = resolved_folder()
    return {"seconds": time.perf_counter() - t0, "configure_s": configure_s, "variant": deployment.variant,
            "note": deployment.note, "verified": verified,
            "numba_cache": (str(numba_folder) if numba_folder else "(none)") if used else "(not used)",
            "jax_cache": os.path.expanduser(str(settings.jax_compilation_cache_dir or "(off)"))}
