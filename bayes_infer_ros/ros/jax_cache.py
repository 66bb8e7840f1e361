"""JAX's process set-up for the node (:func:`setup_jax`: device, persistent compilation cache) and a size cap
for the cache folder (pure, no rclpy).

JAX writes one ``<key>-cache`` file per compiled program (and, when it evicts itself, a ``<key>-atime`` file).
JAX's own cap (``jax_compilation_cache_max_size``) needs the ``filelock`` package; :func:`prune` works without it:
it deletes whole entries, least recently used first (the newest of the entry's files' access/modification
times), until the folder holds at most ``max_bytes``. Only files named like cache entries are touched.
"""
from __future__ import annotations

import os
from pathlib import Path

import jax

_SUFFIXES = ("-cache", "-atime")


def _entries(folder: Path) -> dict[str, list[Path]]:
    out: dict[str, list[Path]] = {}
    for p in folder.iterdir():
        for suffix in _SUFFIXES:
            if p.name.endswith(suffix) and p.is_file():
                out.setdefault(p.name[: -len(suffix)], []).append(p)
    return out


def cache_bytes(folder: os.PathLike) -> int:
    """Bytes held by cache entries in ``folder`` (0 when it does not exist)."""
    folder = Path(folder)
    if not folder.is_dir():
        return 0
    return sum(p.stat().st_size for files in _entries(folder).values() for p in files)


def prune(folder: os.PathLike, max_bytes: int) -> tuple[int, int]:
    """Delete least recently used entries until ``folder`` holds at most ``max_bytes``: (entries removed,
    bytes freed). A file that vanishes meanwhile (another process pruning) is skipped."""
    folder = Path(folder)
    if not folder.is_dir():
        return 0, 0
    sized = []
    for key, files in _entries(folder).items():
        try:
            stats = [p.stat() for p in files]
        except FileNotFoundError:
            continue
        used = max(max(s.st_atime, s.st_mtime) for s in stats)
        sized.append((used, key, files, sum(s.st_size for s in stats)))
    total = sum(s for *_, s in sized)
    removed = freed = 0
    for _used, _key, files, size in sorted(sized, key=lambda t: (t[0], t[1])):
        if total <= max_bytes:
            break
        for p in files:
            try:
                p.unlink()
            except FileNotFoundError:
                pass
        total -= size
        freed += size
        removed += 1
    return removed, freed


def pin_to_cpus(cpus: frozenset[int]) -> None:
    """Restrict the calling thread, and every thread it starts from now on, to ``cpus`` (no-op when empty).

    Called on the node's main thread before the executor spins, the configure thread starts and JAX starts its
    backend: the tick runs on those CPUs and XLA:CPU sizes its thread pool to them, so a pool-mode program's
    hand-offs stay on one core. Threads that exist already (DDS's) keep their affinity."""
    if cpus:
        os.sched_setaffinity(0, cpus)


def setup_jax(device: str, cache_dir: str = "") -> str:
    """Point JAX at ``device`` ("auto": its first) and, with ``cache_dir``, at a persistent compilation cache that
    keeps every program; returns the device as ``platform:id``."""
    if cache_dir:
        cache_dir = os.path.expanduser(cache_dir)
        os.makedirs(cache_dir, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", cache_dir)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    if device == "auto":
        dev = jax.devices()[0]
    else:
        try:
            dev = jax.devices(device)[0]
        except RuntimeError as exc:
            raise RuntimeError(f"device: {device!r} is not available to JAX ({exc}); "
                               f"JAX_PLATFORMS={os.environ.get('JAX_PLATFORMS', '')!r}") from None
    jax.config.update("jax_default_device", dev)
    return f"{dev.platform}:{dev.id}"
