"""Where ``fused_numba``'s compiled kernels are kept on disk, and what happens when they cannot be (no rclpy).

The folder, resolved once per process by :func:`numba_cache_folder`, is the first of these that can be written:

1. ``NUMBA_CACHE_DIR``, when set (numba's own variable);
2. the per-user folder :func:`user_cache_root` ``/ "numba"``: ``$XDG_CACHE_HOME/bayes_infer_ros/numba``,
   by default ``~/.cache/bayes_infer_ros/numba`` (next to the node's JAX compilation cache);
3. none: the kernels compile in memory at every process start (about 8 s on a 2-core x86 VM).

The install tree is never written, so a read-only install (``/opt``, a read-only root filesystem) keeps its
cache as long as one folder above is writable; the node and ``bayes-infer warmup`` resolve the same folder
when they run as the same user with the same environment. A folder skipped, and a cache read or write that fails
later (a disk that fills up), are each logged once as a WARNING on this module's logger (the node forwards it to
its own log) naming ``NUMBA_CACHE_DIR`` and the fix; a failure turns the cache off for the rest of the process.
A cache is an optimisation: nothing here raises.

Nothing read from the folder is trusted. Each index (``.nbi``) and compiled kernel (``.nbc``) is written with a
sha256 digest of its pickle, checked before it is unpickled, and an index must be a map of kernels to files. A file
that fails (one damaged byte, cut short, empty, a valid pickle of another shape, a directory in its place) is a
miss: one WARNING names the file, the file is removed, the kernel compiles, and the entry is written again (a
file that cannot be removed turns that one kernel's cache off). The digest guards against damage, not against a
forger: the folder must be writable only by the user the node runs as (the files are pickles).

The kernels are decorated without ``cache=True`` (numba refuses to import a ``cache=True`` function when no
folder is writable: "cannot cache function ... no locator available"); :func:`enable_disk_cache` gives each of
a module's dispatchers its cache afterwards, as ``cache=True`` would, with a cache that logs instead of raising.
numba keys a cached kernel by its own source file only; a kernel that inlines helpers from other files is also keyed
by those files' contents (``sources``), so that a changed helper is compiled again rather than loaded stale.
"""
from __future__ import annotations

import errno
import hashlib
import io
import logging
import os
import pickle
import threading
from pathlib import Path
from types import ModuleType
from typing import Any, Iterable, Optional

log = logging.getLogger(__name__)

NUMBA_ENV = "NUMBA_CACHE_DIR"
PROBE_BYTES = 4096  # written and removed by unwritable(): a full disk refuses it
DIGEST_BYTES = 32  # sha256, ahead of each cache file's pickle
CACHE_FORMAT = "sha256"  # part of the index's version stamp: plain numba's files are a miss, never read

_lock = threading.RLock()
_resolved: dict[str, Optional[Path]] = {}  # "folder" -> the numba cache folder (None: no cache), once resolved
_enabled: dict[str, Optional[Path]] = {}   # module name -> its kernels' folder (None: no cache)
_caches: list[Any] = []                    # every cache enable_disk_cache made (turned off together)
_warned: set[str] = set()


def warn_once(key: str, message: str) -> bool:
    """Log ``message`` as a WARNING unless ``key`` was logged before in this process; True when logged."""
    with _lock:
        if key in _warned:
            return False
        _warned.add(key)
    log.warning(message)
    return True


def user_cache_root() -> Path:
    """The per-user cache folder of this package: ``$XDG_CACHE_HOME/bayes_infer_ros`` (an absolute
    XDG_CACHE_HOME), else ``~/.cache/bayes_infer_ros``."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path(os.path.expanduser("~")) / ".cache"
    return base / "bayes_infer_ros"


def unwritable(folder: os.PathLike) -> Optional[str]:
    """Why ``folder`` cannot hold a cache (None: it can). The folder is created when missing, then a
    PROBE_BYTES file is written, flushed to disk and removed: a read-only or full file system, a path under a
    regular file and a folder without write permission all give the OS's reason."""
    probe = Path(folder) / f".write-probe-{os.getpid()}-{threading.get_ident()}"
    try:
        os.makedirs(folder, exist_ok=True)
        try:
            with open(probe, "wb") as f:
                f.write(b"\0" * PROBE_BYTES)
                f.flush()
                os.fsync(f.fileno())
        finally:
            if probe.exists():
                probe.unlink()
    except OSError as exc:
        return f"{exc.strerror or type(exc).__name__}" + (f" ({exc.filename})" if exc.filename else "")
    return None


def numba_cache_folder() -> Optional[Path]:
    """The folder fused_numba's kernels are cached in (None: no cache), resolved once per process; a folder
    that was skipped is logged once (see the module docstring)."""
    with _lock:
        if "folder" in _resolved:
            return _resolved["folder"]
        user_set = os.environ.get(NUMBA_ENV, "")
        default = user_cache_root() / "numba"
        candidates = ([(f"{NUMBA_ENV}={user_set}", Path(os.path.expanduser(user_set)))] if user_set else []) + [
            (f"the per-user folder {default}", default)]
        skipped = []
        chosen = None
        for what, folder in candidates:
            reason = unwritable(folder)
            if reason is None:
                chosen = folder
                break
            skipped.append(f"{what} cannot be written: {reason}")
        _resolved["folder"] = chosen
    if skipped:
        fix = (f"set {NUMBA_ENV} to a writable folder (or XDG_CACHE_HOME; the same for `bayes-infer warmup` and "
               "the node)")
        if chosen is not None:
            warn_once("numba-folder", f"numba kernel cache: {'; '.join(skipped)}; using {chosen}. To use your "
                      f"folder: make it writable, or {fix}")
        else:
            warn_once("numba-folder", f"numba kernel cache: {'; '.join(skipped)}; running without it: "
                      f"fused_numba's kernels compile at every start (seconds). Fix: {fix}")
    return chosen


def resolved_folder() -> tuple[bool, Optional[Path]]:
    """(whether this process resolved the numba cache folder, i.e. built fused_numba; the folder or None)."""
    with _lock:
        return "folder" in _resolved, _resolved.get("folder")


def _turn_off(action: str, exc: BaseException) -> None:
    """A cache read/write failed: every kernel cache off for the rest of the process, logged once."""
    with _lock:
        for cache in _caches:
            cache.disable()
    folder = _resolved.get("folder")
    full = isinstance(exc, OSError) and exc.errno == errno.ENOSPC
    warn_once("numba-io", f"numba kernel cache: could not {action} {folder} ({type(exc).__name__}: {exc}); running "
              f"without it for the rest of this process{': the disk is full' if full else ''}. Fix: free space or "
              f"make it writable, or set {NUMBA_ENV} to a writable folder")


def sources_digest(sources: Iterable[os.PathLike]) -> str:
    """sha256 of the files' contents, in the order given ("" for none, or when one cannot be read)."""
    paths = list(sources)
    if not paths:
        return ""
    h = hashlib.sha256()
    try:
        for path in paths:
            h.update(Path(path).read_bytes())
    except OSError:
        return ""
    return h.hexdigest()


class DamagedEntry(Exception):
    """A cache file that cannot be used: damaged, of another shape, or not a file. ``path``: the file."""

    def __init__(self, path: os.PathLike, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = Path(path)
        self.reason = reason


def _checked(path: Path, raw: bytes) -> bytes:
    """The payload of ``raw`` (a sha256 digest, then the payload), or DamagedEntry when the digest does not match."""
    digest, payload = raw[:DIGEST_BYTES], raw[DIGEST_BYTES:]
    if len(digest) < DIGEST_BYTES or hashlib.sha256(payload).digest() != digest:
        raise DamagedEntry(path, f"its checksum does not match its {len(raw)} bytes (damaged or cut short)")
    return payload


def _read_regular(path: Path) -> bytes:
    """The bytes of ``path``; DamagedEntry when something other than a regular file is there (FileNotFoundError
    when nothing is)."""
    if path.exists() and not path.is_file():
        raise DamagedEntry(path, "it is not a regular file")
    with open(path, "rb") as f:
        return f.read()


def _tolerant_cache_class() -> type:
    # optional dependency: numba (only fused_numba's kernels get here)
    import numba
    from numba.core.caching import FunctionCache, IndexDataCacheFile  # optional (numba)

    class CheckedCacheFile(IndexDataCacheFile):
        """numba's index (``.nbi``) and data (``.nbc``) files, each written with a sha256 digest of its pickle and
        verified before it is unpickled, the index's contents checked for their shape: a damaged, cut or foreign
        file raises DamagedEntry instead of loading a wrong kernel. The format's version (``CACHE_FORMAT``) differs
        from plain numba's, so an index written by ``cache=True`` or an older format is an ordinary miss."""

        def __init__(self, cache_path: str, filename_base: str, source_stamp: Any):
            super().__init__(cache_path, filename_base, source_stamp)
            self._version = f"{numba.__version__}+{CACHE_FORMAT}"
            self.index_path = Path(cache_path) / f"{filename_base}.nbi"

        def _load_index(self) -> dict:
            path = self.index_path
            try:
                raw = _read_regular(path)
            except FileNotFoundError:
                return {}
            stream = io.BytesIO(raw)
            try:
                version = pickle.load(stream)
            except Exception as exc:  # noqa: BLE001 - whatever the damage, the file is not an index
                raise DamagedEntry(path, f"its version stamp does not read ({type(exc).__name__}: {exc})") from None
            if version != self._version:  # another numba or format: a miss, replaced by the next save
                return {}
            try:
                stamp, overloads = pickle.loads(_checked(path, stream.read()))
            except DamagedEntry:
                raise
            except Exception as exc:  # noqa: BLE001
                raise DamagedEntry(path, f"its index does not read ({type(exc).__name__}: {exc})") from None
            if not isinstance(overloads, dict) or not all(isinstance(v, str) for v in overloads.values()):
                raise DamagedEntry(path, f"its index is a {type(overloads).__name__}, not a map of kernels to files")
            return overloads if stamp == self._source_stamp else {}

        def _save_index(self, overloads: dict) -> None:
            payload = self._dump((self._source_stamp, overloads))
            with self._open_for_write(str(self.index_path)) as f:
                pickle.dump(self._version, f, protocol=-1)
                f.write(hashlib.sha256(payload).digest() + payload)

        def _load_data(self, name: str) -> Any:
            path = Path(self._data_path(name))
            payload = _checked(path, _read_regular(path))
            try:
                return pickle.loads(payload)
            except Exception as exc:  # noqa: BLE001
                raise DamagedEntry(path, f"it does not unpickle ({type(exc).__name__}: {exc})") from None

        def _save_data(self, name: str, data: Any) -> None:
            payload = self._dump(data)
            with self._open_for_write(self._data_path(name)) as f:
                f.write(hashlib.sha256(payload).digest() + payload)

    class TolerantFunctionCache(FunctionCache):
        """numba's per-function disk cache (what ``cache=True`` makes) over :class:`CheckedCacheFile`, where nothing
        read from disk is trusted. A damaged entry (``DamagedEntry``, or a kernel that does not rebuild from its
        file) is a miss: the file is removed and named in one WARNING, the kernel compiles, and its save writes the
        entry again (a file that cannot be removed, such as a directory in its place, turns this kernel's cache
        off). A read or write the disk refuses turns every kernel cache off (:func:`_turn_off`). ``digest`` (of the
        sources the kernel inlines from other files) is part of each entry's key."""

        digest = ""

        def __init__(self, py_func: Any):
            super().__init__(py_func)
            self._cache_file = CheckedCacheFile(self.cache_path, self._impl.filename_base,
                                                self._impl.locator.get_source_stamp())

        def _index_key(self, sig: Any, codegen: Any) -> Any:
            return (*super()._index_key(sig, codegen), self.digest)

        def _damaged(self, path: Path, reason: str) -> None:
            """A miss on a damaged file: remove it (the next save writes it again) or, when it cannot be removed,
            turn this kernel's cache off; one WARNING per file."""
            try:
                path.unlink()
                outcome = "removed; the kernel compiles now and is cached again"
            except OSError as exc:
                self.disable()
                outcome = (f"it cannot be removed ({exc.strerror or type(exc).__name__}): this kernel compiles at "
                           "every start until it is removed")
            warn_once(f"damaged:{path}", f"numba kernel cache: {path} cannot be used ({reason}); {outcome}")

        def load_overload(self, sig: Any, target_context: Any) -> Any:
            try:
                return super().load_overload(sig, target_context)
            except DamagedEntry as exc:
                self._damaged(exc.path, exc.reason)
            except OSError as exc:
                _turn_off("read", exc)
            except Exception as exc:  # noqa: BLE001 - an entry that reads but does not rebuild a kernel
                self._damaged(self._cache_file.index_path, f"its kernel does not rebuild ({type(exc).__name__}: "
                              f"{' '.join(str(exc).split())[:160]})")
            return None

        def save_overload(self, sig: Any, data: Any) -> None:
            try:
                super().save_overload(sig, data)
            except DamagedEntry as exc:
                self._damaged(exc.path, exc.reason)
            except OSError as exc:
                _turn_off("write", exc)

    return TolerantFunctionCache


def enable_disk_cache(module: ModuleType, sources: Iterable[os.PathLike] = ()) -> Optional[Path]:
    """Give every numba dispatcher defined in ``module`` its on-disk cache in :func:`numba_cache_folder` (once per
    module and process), keyed also by the contents of ``sources`` (the files its kernels inline code from);
    returns the folder, None when the kernels run without a cache."""
    import numba  # optional dependency: numba (only fused_numba's kernels get here)
    from numba.core.dispatcher import Dispatcher  # optional (numba)

    with _lock:
        if module.__name__ in _enabled:
            return _enabled[module.__name__]
        folder = numba_cache_folder()
        dispatchers = [v for v in vars(module).values() if isinstance(v, Dispatcher) and hasattr(v, "_cache")
                       and getattr(v.py_func, "__module__", None) == module.__name__]
        if folder is not None:
            cls = type("TolerantFunctionCache", (_tolerant_cache_class(),), {"digest": sources_digest(sources)})
            saved = numba.config.CACHE_DIR
            numba.config.CACHE_DIR = str(folder)  # read by numba's locator when each cache is made, only here
            try:
                caches = [cls(d.py_func) for d in dispatchers]
            except (RuntimeError, OSError) as exc:  # numba found no folder it can write after all
                folder = None
                warn_once("numba-folder", f"numba kernel cache: numba could not use {numba.config.CACHE_DIR} "
                          f"({exc}); running without it. Fix: set {NUMBA_ENV} to a writable folder")
            finally:
                numba.config.CACHE_DIR = saved
            if folder is not None:
                for d, cache in zip(dispatchers, caches):
                    d._cache = cache  # what Dispatcher.enable_caching() sets, with the tolerant class
                _caches.extend(caches)
        _enabled[module.__name__] = folder
        return folder
