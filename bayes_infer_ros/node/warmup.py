"""Filling the caches the node's configure reads, so that the first start after an install is a warm start
(``bayes-infer warmup``: ``cli/warmup.py``).

:func:`warm` runs the node's configure work itself (:meth:`~.engine_host.EngineHost.load_and_build`: JAX set-up with
``jax_compilation_cache_dir``, the model, ``build_slot``: the start of ``variant: auto``), then its verify step, on the
parameters a params file gives the node (default: the installed ``config/agent.yaml``, the shipped model and the
node's defaults), in this process, without ROS. What it fills:

- numba's kernel cache (``inference.kernel_cache``): ``NUMBA_CACHE_DIR``, else ``$XDG_CACHE_HOME/bayes_infer_ros/numba``
  (default ``~/.cache/bayes_infer_ros/numba``);
- JAX's persistent compilation cache: ``jax_compilation_cache_dir`` (default ``~/.cache/bayes_infer_ros/jax``);
- the decision cache (``autotune.decision_cache``): where ``variant: auto`` has candidates to verify, warmup runs the
  verify step (in a child process, as the node does) and waits for it, so the node's first start runs the verified
  engine at once and verifies nothing.

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

from bayes_infer_ros.autotune.decision_cache import DecisionCache
from bayes_infer_ros.inference.kernel_cache import resolved_folder
from bayes_infer_ros.model.io import read_parameters_yaml
from .engine_host import EngineHost, forward_cache_warnings
from .parameters import PARAMETERS
from .verification import VERIFY_TIMEOUT_S, Verification

log = logging.getLogger("bayes_infer_ros.warmup")


def node_parameters(params_file: Path) -> dict[str, Any]:
    """The node's parameter values for ``params_file``: the table's defaults, then the file's ``/**`` section."""
    values = {spec.name: spec.default for spec in PARAMETERS}
    values.update(read_parameters_yaml(params_file))
    return values


def warm(params_file: Path) -> dict[str, Any]:
    """Configure once, as the node would with ``params_file``; returns what it built and where the caches are."""
    values = node_parameters(params_file)
    model_values = {k: v for k, v in values.items() if k.startswith("model.")}
    counts: dict[str, int] = {}

    def count(name: str, n: int = 1) -> None:
        counts[name] = counts.get(name, 0) + n

    host = EngineHost(values.__getitem__, lambda: model_values, log, count, lambda: False)
    host.agents = [str(a) for a in values.get("agents") or []]  # a fleet's batch, as the node's configure builds it
    forward_cache_warnings(None)  # the cache modules' warnings reach the console once, through the root logger
    t0 = time.perf_counter()
    slot = host.load_and_build()
    configure_s = time.perf_counter() - t0
    verified = ""
    if slot.plan is not None and slot.plan.verify:
        cache = DecisionCache.from_environment()
        job = Verification(host.model, slot.plan, lambda outcome: None, cache=cache,
                           jax_cache_dir=host.jax_cache_dir()).start()
        log.info(job.status)
        outcome = job.wait(VERIFY_TIMEOUT_S)
        verified = outcome.reason if outcome is not None else f"the verify step did not end in {VERIFY_TIMEOUT_S:g} s"
        for warning in cache.warnings:
            log.warning(warning)
    used, numba_folder = resolved_folder()
    return {"seconds": time.perf_counter() - t0, "configure_s": configure_s, "variant": slot.variant,
            "note": slot.note, "verified": verified,
            "numba_cache": (str(numba_folder) if numba_folder else "(none)") if used else "(not used)",
            "jax_cache": os.path.expanduser(str(values.get("jax_compilation_cache_dir") or "(off)"))}
