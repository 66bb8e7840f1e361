"""Verified decisions kept on disk, so a restart runs what the last verify step measured without timing again.

A record is keyed by everything the timing depended on: the model's structure, the engine settings, the devices
found, this machine (host name, processor, CPU count) and the versions of the package, jax, jaxlib and numba. Any
change there is a miss, and the verify step runs again. ``bayes-infer warmup`` fills it for the shipped model.

Folder: ``$BAYES_INFER_DECISION_CACHE`` when set (``off`` turns the cache off), else
``$XDG_CACHE_HOME/bayes_infer_ros/decisions`` (``~/.cache/...``). An unwritable or full folder is not an error:
the record is not kept, and ``DecisionCache.warnings`` says why once.

A record is untrusted input. One that cannot be used (not JSON, a field missing or of the wrong type, timings that
are not seconds, another key's record, a directory in the file's place; and, judged by ``decide``, a candidate that
is not one here or that no longer builds) is a miss: ``refuse`` adds one warning naming the file, the candidates
are timed again, and the new record replaces it.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import math
import os
import platform
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

ENV = "BAYES_INFER_DECISION_CACHE"
MAX_RECORD_BYTES = 65536  # a record is a few hundred bytes: a larger file is not one


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


def record_problem(record: Any, key: str) -> Optional[str]:
    """Why ``record`` (parsed JSON) is not a usable record for ``key`` (None: it is)."""
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not an object"
    for name, kind in (("key", str), ("device", str), ("variant", str), ("created", str), ("timings", dict)):
        if name not in record:
            return f"no {name!r} field" + (" (written by an older version, or damaged)" if name == "key" else "")
        if not isinstance(record[name], kind):
            return f"{name!r} is {json.dumps(record[name])[:60]}, expected a JSON {'object' if kind is dict else 'string'}"
    if record["key"] != key:
        return f"it is the record of another model or setting (key {record['key'][:40]!r})"
    for name, seconds in record["timings"].items():
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or math.isnan(seconds) or seconds < 0:
            return f"timings[{name!r}] is {json.dumps(seconds)[:40]}, expected seconds >= 0"
    return None


@dataclass
class DecisionCache:
    """Load and store verified decisions (``{"key", "device", "variant", "timings", "created"}``) by key.

    ``warnings``: what went wrong with the folder or a record, each once (an unwritable folder, a refused record
    naming its file)."""

    folder: Optional[Path]
    warnings: list[str] = field(default_factory=list)
    refused: set[Path] = field(default_factory=set)

    @classmethod
    def from_environment(cls) -> "DecisionCache":
        return cls(default_folder())

    @staticmethod
    def key(parts: dict[str, Any]) -> str:
        text = json.dumps({**parts, "machine": machine_fingerprint()}, sort_keys=True, default=repr)
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def path(self, key: str) -> Optional[Path]:
        return None if self.folder is None else self.folder / f"{key}.json"

    def _warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def refuse(self, key: str, reason: str) -> None:
        """The record of ``key`` cannot be used (``reason``): a miss, with one warning naming its file."""
        path = self.path(key)
        if path is None or path in self.refused:
            return
        self.refused.add(path)
        if path.is_dir():
            self._warn(f"decision cache: {path} is a directory, not a record: each start times the candidates again "
                       "until it is removed")
        else:
            self._warn(f"decision cache: {path} is not used ({reason}): the candidates are timed again and the new "
                       "decision replaces it")

    def load(self, key: str) -> Optional[dict[str, Any]]:
        """The record of ``key``; None when there is none, or when it cannot be used (``refuse``d)."""
        path = self.path(key)
        if path is None or not (path.exists() or path.is_symlink()):
            return None
        try:
            if path.is_dir():
                raise IsADirectoryError(f"{path} is a directory")
            if path.stat().st_size > MAX_RECORD_BYTES:
                raise ValueError(f"{path.stat().st_size} bytes, larger than any record")
            record = json.loads(path.read_bytes().decode("utf-8"))
        except (OSError, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            self.refuse(key, f"{type(exc).__name__}: {' '.join(str(exc).split())[:120]}")
            return None
        problem = record_problem(record, key)
        if problem is not None:
            self.refuse(key, problem)
            return None
        return record

    def store(self, key: str, device: str, variant: str, timings: dict[str, float]) -> None:
        path = self.path(key)
        if path is None:
            return
        record = {"key": key, "device": device, "variant": variant, "timings": timings,
                  "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(record, indent=1))
            os.replace(tmp, path)
        except OSError as exc:
            if path in self.refused:  # its warning already says why (a directory in the file's place)
                with contextlib.suppress(OSError):
                    tmp.unlink(missing_ok=True)
                return
            self._warn(f"the decision cache {self.folder} is not writable ({exc.strerror or exc}): each start "
                       f"times the candidates again; set {ENV} to a writable folder, or to 'off'")
