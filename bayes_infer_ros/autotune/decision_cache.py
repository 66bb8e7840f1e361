"""Verified decisions kept on disk, so a restart runs what the last verify step measured without timing again.

A record is keyed by everything the timing depended on: the model's structure, the engine settings, the devices
found, this machine (host name, processor, CPU count) and the versions of the package, jax, jaxlib and numba. Any
change there is a miss, and the verify step runs again. ``bayes-infer warmup`` fills it for the shipped model.

Folder: ``$BAYES_INFER_DECISION_CACHE`` when set (``off`` turns the cache off), else
``$XDG_CACHE_HOME/bayes_infer_ros/decisions`` (``~/.cache/...``). An unwritable or full folder is not an error:
the record is not kept, and ``DecisionCache.warning`` says why once.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

ENV = "BAYES_INFER_DECISION_CACHE"


def default_folder() -> Optional[Path]:
    """The cache folder from the environment (None: turned off)."""
    value = os.environ.get(ENV, "")
    if value.lower() in ("off", "0", "false", "none"):
        return None
    if value:
        return Path(value).expanduser()
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "bayes_infer_ros" / "decisions"


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return ""


def machine_fingerprint() -> dict[str, Any]:
    """What a timing on this machine depends on besides the model and the settings."""
    return {"host": socket.gethostname(), "machine": platform.machine(), "processor": platform.processor(),
            "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
            "versions": {d: _version(d) for d in ("bayes_infer_ros", "jax", "jaxlib", "numba")}}


@dataclass
class DecisionCache:
    """Load and store verified decisions (``{"device", "variant", "timings", "created"}``) by key."""

    folder: Optional[Path]
    warning: str = ""

    @classmethod
    def from_environment(cls) -> "DecisionCache":
        return cls(default_folder())

    @staticmethod
    def key(parts: dict[str, Any]) -> str:
        text = json.dumps({**parts, "machine": machine_fingerprint()}, sort_keys=True, default=repr)
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def load(self, key: str) -> Optional[dict[str, Any]]:
        if self.folder is None:
            return None
        try:
            record = json.loads((self.folder / f"{key}.json").read_text())
        except (OSError, ValueError):
            return None
        return record if isinstance(record, dict) and {"device", "variant"} <= set(record) else None

    def store(self, key: str, device: str, variant: str, timings: dict[str, float]) -> None:
        if self.folder is None:
            return
        record = {"device": device, "variant": variant, "timings": timings,
                  "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        path = self.folder / f"{key}.json"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps(record, indent=1))
            os.replace(tmp, path)
        except OSError as exc:
            if not self.warning:
                self.warning = (f"the decision cache {self.folder} is not writable ({exc.strerror or exc}): each start "
                                f"times the candidates again; set {ENV} to a writable folder, or to 'off'")
