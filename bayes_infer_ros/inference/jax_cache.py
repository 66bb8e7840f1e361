"""JAX's process set-up for the node (:func:`setup_jax`: device, persistent compilation cache) and a size cap
for the cache folder (pure, no rclpy).

JAX writes one ``<key>-cache`` file per compiled program (and, when it evicts itself, a ``<key>-atime`` file).
JAX's own cap (``jax_compilation_cache_max_size``) needs the ``filelock`` package; :func:`prune` works without it:
it deletes whole entries, least recently used first (the newest of the entry's files' access/modification
times), until the folder holds at most ``max_bytes``. Only files named like cache entries are touched.

The cache is optional. A folder that cannot be written (a read-only HOME, ``/proc/...``, a path under a regular
file, a full disk) is logged once per process and folder as a WARNING on this module's logger (the node forwards
it to its own log) naming ``jax_compilation_cache_dir`` and the fix, and JAX runs without the cache. A write that
fails later (the disk fills up) reaches JAX's own "Error writing persistent compilation cache entry" warning:
:func:`setup_jax` turns the first such warning into one WARNING and the cache off, and drops the rest.

An entry is untrusted input. JAX reads a damaged one (a damaged byte, cut short, empty, a directory in its place, an
executable XLA cannot parse) as a miss and warns without naming the file, and it never overwrites an entry that
exists, so the damage would stay. Its read warning is turned into a miss that repairs itself: the entry is named in
one WARNING and removed, and JAX writes it again after compiling (a directory stays: named, compiled at every start).
"""
from __future__ import annotations

import logging
import os
import re
import threading
import warnings
from pathlib import Path
from typing import Optional

import jax
from jax._src import compilation_cache as jax_compilation_cache  # the entries' own format (decompress)
from jax.experimental.compilation_cache import compilation_cache

from .kernel_cache import unwritable

log = logging.getLogger(__name__)

PARAMETER = "jax_compilation_cache_dir"
FIX = f"set {PARAMETER} to a writable folder, or to '' to turn the cache off"
_JAX_CACHE_WARNING = "persistent compilation cache entry"  # in JAX's "Error reading/writing ..." warnings
# JAX's read error names the program (or, from its existence check, the entry's key)
_READ_ERROR = re.compile(r"Error reading persistent compilation cache entry for '([^']+)'")
_ENTRY = re.compile(r".+-[0-9a-f]{64}-cache")  # an entry: <program name>-<sha256 hex>-cache
_TIME_BYTES = 4  # an entry decompresses to the compile time (4 bytes), then the serialized executable
_lock = threading.Lock()
_warned: set[str] = set()
_guard = {"installed": False, "tripped": False}

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


def _warn_once(key: str, message: str) -> None:
    with _lock:
        if key in _warned:
            return
        _warned.add(key)
    log.warning(message)


def entry_problem(path: Path) -> Optional[str]:
    """Why the cache entry ``path`` cannot be read (None: it decompresses into an entry). An entry whose executable
    XLA cannot parse after all passes here: only JAX's own read can tell."""
    if not path.is_file():
        return "not a regular file"
    try:
        data = jax_compilation_cache.decompress_executable(path.read_bytes())
    except Exception as exc:  # noqa: BLE001 - whatever the damage, the entry is unusable
        return f"{type(exc).__name__}: {exc}"
    if len(data) <= _TIME_BYTES:
        return f"{len(data)} bytes after decompression, no executable"
    return None


def _discard_damaged(message: str) -> None:
    """JAX could not read an entry of the program named in ``message`` (its warning names the program, not the
    file): the program's entries that do not decompress are removed, or all of them when each does (XLA could not
    parse one); each named in one WARNING. JAX then compiles the program and writes its entry again."""
    found = _READ_ERROR.search(message)
    folder = Path(str(jax.config.jax_compilation_cache_dir or ""))
    if found is None or not folder.is_dir():
        return
    name = found.group(1)
    mine = re.compile(re.escape(name) + r"(-[0-9a-f]{64})?-cache")  # the program's entries, or the key's one
    entries = sorted(p for p in folder.iterdir() if _ENTRY.fullmatch(p.name) and mine.fullmatch(p.name))
    if not entries:
        _warn_once(f"read:{name}", f"{PARAMETER} {folder}: JAX could not read a cache entry ({message}); the "
                   "program compiles again")
        return
    problems = {p: entry_problem(p) for p in entries}
    damaged = {p: why for p, why in problems.items() if why} or {p: message.split(": ", 1)[-1] for p in entries}
    for path, why in damaged.items():
        if path.is_dir():
            outcome = "a directory cannot be replaced: this program compiles at every start until it is removed"
        else:
            try:
                for f in (path, path.with_name(path.name[: -len("-cache")] + "-atime")):
                    f.unlink(missing_ok=True)
                outcome = "removed; the program compiles now and its entry is written again"
            except OSError as exc:
                outcome = f"it cannot be removed ({exc.strerror or exc}): this program compiles at every start"
        _warn_once(f"entry:{path}", f"{PARAMETER}: the cache entry {path} cannot be used ({' '.join(why.split())[:160]}"
                   f"); {outcome}")


def _on_warning(previous):
    """A ``warnings.showwarning`` that handles JAX's cache errors and hands every other warning to ``previous``: an
    entry JAX could not read is a miss (:func:`_discard_damaged`: named, removed, written again); the first write
    error becomes one WARNING and the cache off (the rest are dropped)."""
    def show(message, category, filename, lineno, file=None, line=None):
        if _JAX_CACHE_WARNING not in str(message):
            return previous(message, category, filename, lineno, file, line)
        if _READ_ERROR.search(str(message)):
            _discard_damaged(str(message))
            return None
        with _lock:
            tripped, _guard["tripped"] = _guard["tripped"], True
        if not tripped:
            jax.config.update("jax_enable_compilation_cache", False)
            compilation_cache.reset_cache()
            folder = jax.config.jax_compilation_cache_dir
            _warn_once(f"io:{folder}", f"{PARAMETER} {folder}: JAX could not use the compilation cache ({message}); "
                       f"running without it for the rest of this process. Fix: free space, or {FIX}")
    return show


def enable_cache(cache_dir: str) -> bool:
    """Point JAX's persistent compilation cache at ``cache_dir`` (``~`` expanded), keeping every program; False
    (logged once, nothing raised) when the folder cannot be written."""
    folder = os.path.expanduser(cache_dir)
    reason = unwritable(folder)
    if reason is not None:
        _warn_once(f"folder:{folder}", f"{PARAMETER} {cache_dir!r} cannot be written ({reason}); running without "
                   f"JAX's compilation cache: every start compiles its programs again. Fix: {FIX}")
        return False
    with _lock:
        if not _guard["installed"]:
            warnings.showwarning = _on_warning(warnings.showwarning)
            _guard["installed"] = True
    jax.config.update("jax_compilation_cache_dir", folder)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return True


def setup_jax(device: str, cache_dir: str = "") -> str:
    """Point JAX at ``device`` ("auto": its first) and, with ``cache_dir``, at a persistent compilation cache that
    keeps every program (:func:`enable_cache`: an unwritable folder is logged, never raised); returns the device
    as ``platform:id``."""
    if cache_dir:
        enable_cache(cache_dir)
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
