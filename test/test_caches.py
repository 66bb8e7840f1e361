"""The caches are optional: an unwritable or full numba or JAX cache folder never fails the node's
configure, never makes ``variant: auto`` drop fused_numba, and is logged once as a WARNING naming
``NUMBA_CACHE_DIR`` / ``jax_compilation_cache_dir``.

The tests run as root, where a chmod'ed folder stays writable: an unwritable folder is a path under a regular file
or under /proc, and a full disk is an ``open`` for writing that raises ENOSPC. The configure runs (the node's
``AgentRuntime.configure``, what ``bayes-infer warmup`` runs) are subprocesses: numba's kernels and JAX's cache
are set up once per process.
"""
from __future__ import annotations

import builtins
import errno
import importlib
import importlib.util
import json
import logging
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bayes_infer_ros.inference import kernel_cache
from configure_probe import CONFIGURE, only
from tolerances import FLOAT32_ATOL

REPO = Path(__file__).resolve().parents[1]

# ---- the folder check and the fallback order (in-process, fast) ----------------------------------------------
@pytest.fixture
def fresh_kernel_cache(monkeypatch):
    """kernel_cache's once-per-process state, empty for this test (and restored after it)."""
    monkeypatch.setattr(kernel_cache, "_resolved", {})
    monkeypatch.setattr(kernel_cache, "_warned", set())
    monkeypatch.setattr(kernel_cache, "_caches", [])
    return kernel_cache


def test_unwritable_names_the_reason_for_a_path_under_a_file_proc_and_a_full_disk(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("x")
    assert kernel_cache.unwritable(tmp_path / "ok" / "sub") is None
    assert "Not a directory" in kernel_cache.unwritable(tmp_path / "file" / "sub")
    assert kernel_cache.unwritable("/proc/self/bayes_infer_ros_cache") is not None
    real_open = builtins.open

    def full(file, mode="r", *args, **kwargs):
        if "w" in mode and str(file).startswith(str(tmp_path)):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(file))
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", full)
    assert "No space left" in kernel_cache.unwritable(tmp_path / "full")
    assert not [p for p in (tmp_path / "full").iterdir()]  # no probe file left behind


def test_numba_folder_skips_an_unwritable_numba_cache_dir_with_one_warning(fresh_kernel_cache, tmp_path,
                                                                          monkeypatch, caplog):
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "file" / "numba"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    with caplog.at_level(logging.WARNING, logger=kernel_cache.__name__):
        assert fresh_kernel_cache.numba_cache_folder() == tmp_path / "xdg" / "bayes_infer_ros" / "numba"
        assert fresh_kernel_cache.numba_cache_folder() == tmp_path / "xdg" / "bayes_infer_ros" / "numba"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "NUMBA_CACHE_DIR" in warnings[0] and "file/numba" in warnings[0]


def test_numba_folder_is_none_when_nothing_can_be_written(fresh_kernel_cache, tmp_path, monkeypatch, caplog):
    (tmp_path / "file").write_text("x")
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file" / "xdg"))
    with caplog.at_level(logging.WARNING, logger=kernel_cache.__name__):
        assert fresh_kernel_cache.numba_cache_folder() is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "NUMBA_CACHE_DIR" in warnings[0] and "running without it" in warnings[0]


def test_user_cache_root_follows_xdg_cache_home_then_home(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert kernel_cache.user_cache_root() == tmp_path / "bayes_infer_ros"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert kernel_cache.user_cache_root() == tmp_path / "home" / ".cache" / "bayes_infer_ros"


@pytest.mark.numba
def test_a_failed_kernel_cache_write_compiles_anyway_and_turns_the_cache_off_once(fresh_kernel_cache, tmp_path,
                                                                                  monkeypatch, caplog):
    pytest.importorskip("numba")
    source = tmp_path / "tiny_kernels.py"
    source.write_text("import numba\n\n@numba.njit\ndef plus_one(x):\n    return x + 1\n\n"
                      "@numba.njit\ndef times_two(x):\n    return x * 2\n")
    spec = importlib.util.spec_from_file_location("tiny_kernels", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(kernel_cache, "_enabled", {})
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))
    assert fresh_kernel_cache.enable_disk_cache(module) == tmp_path / "numba"
    real_open = builtins.open

    def full(file, mode="r", *args, **kwargs):
        if "w" in mode and ".nb" in str(file):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(file))
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", full)
    with caplog.at_level(logging.WARNING, logger=kernel_cache.__name__):
        assert module.plus_one(1) == 2
        assert module.times_two(3) == 6
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "NUMBA_CACHE_DIR" in warnings[0] and "disk is full" in warnings[0]
    assert not list((tmp_path / "numba").rglob("*.nbc"))


@pytest.mark.numba
def test_a_kernel_is_compiled_again_when_a_helper_it_inlines_from_another_file_changes(fresh_kernel_cache, tmp_path,
                                                                                       monkeypatch):
    """numba keys a cached kernel by its own file; fused_numba's kernels inline helpers from sibling files, which
    are part of the key through ``sources``: an unchanged helper loads the cached kernel, a changed one compiles it."""
    pytest.importorskip("numba")
    helper, kernel = tmp_path / "tiny_helper.py", tmp_path / "tiny_kernel.py"
    helper.write_text('import numba\n\n@numba.njit(inline="always")\ndef step(x):\n    return x + 1\n')
    kernel.write_text("import numba\nfrom tiny_helper import step\n\n@numba.njit\ndef run(x):\n    return step(x)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))

    def fresh_run():
        for name in ("tiny_helper", "tiny_kernel"):
            sys.modules.pop(name, None)
        module = importlib.import_module("tiny_kernel")
        monkeypatch.setattr(kernel_cache, "_enabled", {})
        fresh_kernel_cache.enable_disk_cache(module, [helper, kernel])
        return module.run

    run = fresh_run()
    assert run(1) == 2 and not run.stats.cache_hits
    run = fresh_run()
    assert run(1) == 2 and sum(run.stats.cache_hits.values()) == 1
    helper.write_text(helper.read_text().replace("x + 1", "x + 2"))
    run = fresh_run()
    assert run(1) == 3 and not run.stats.cache_hits
    for name in ("tiny_helper", "tiny_kernel"):
        sys.modules.pop(name, None)


# ---- a damaged numba cache file is a miss: compiled again, one warning naming the file, the entry replaced -----
def _damage_byte(offset: int, value: int):
    def damage(path: Path) -> None:
        data = bytearray(path.read_bytes())
        data[offset % len(data)] = value if value >= 0 else data[offset % len(data)] ^ 0xFF
        path.write_bytes(bytes(data))
    return damage


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _wrong_shape_index(path: Path) -> None:
    """The index's leading version pickle kept, the rest replaced by a valid pickle of something else."""
    import pickle

    with open(path, "rb") as f:
        pickle.load(f)
        head = f.tell()
    path.write_bytes(path.read_bytes()[:head] + pickle.dumps({"not": "an index"}))


def _wrong_shape_data(path: Path) -> None:
    import pickle

    path.write_bytes(pickle.dumps(("not", "a", "compiled", "kernel")))


NUMBA_DAMAGE = {
    # the corruptions: one damaged byte at the start of the index, a protocol byte numba's pickle refuses
    # ("unsupported pickle protocol"), a valid pickle of the wrong shape
    "index_first_byte": ("nbi", _damage_byte(0, -1)),
    "index_protocol": ("nbi", _damage_byte(1, 99)),
    "index_wrong_shape": ("nbi", _wrong_shape_index),
    "index_truncated": ("nbi", _truncate),
    "index_empty": ("nbi", _empty),
    "index_directory": ("nbi", _directory),
    "data_middle_byte": ("nbc", _damage_byte(-200, -1)),
    "data_first_byte": ("nbc", _damage_byte(0, -1)),
    "data_wrong_shape": ("nbc", _wrong_shape_data),
    "data_truncated": ("nbc", _truncate),
    "data_empty": ("nbc", _empty),
    "data_directory": ("nbc", _directory),
}


@pytest.mark.numba
@pytest.mark.parametrize("damage", list(NUMBA_DAMAGE))
def test_a_damaged_kernel_cache_file_is_compiled_again_with_one_warning_naming_it(fresh_kernel_cache, tmp_path,
                                                                                  monkeypatch, caplog, damage):
    """Anything read from the cache is untrusted: a damaged index (.nbi) or compiled kernel (.nbc) is a miss. The
    kernel compiles again and gives its result, one WARNING names the file, the other kernels keep their cache, and
    the entry is replaced, so the next process loads it again (a directory in the file's place cannot be replaced:
    that kernel runs without its cache)."""
    pytest.importorskip("numba")
    source = tmp_path / "tiny_damaged.py"
    source.write_text("import numba\n\n@numba.njit\ndef plus_one(x):\n    return x + 1\n\n"
                      "@numba.njit\ndef times_two(x):\n    return x * 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))

    def fresh_module():
        sys.modules.pop("tiny_damaged", None)
        module = importlib.import_module("tiny_damaged")
        monkeypatch.setattr(kernel_cache, "_enabled", {})
        fresh_kernel_cache.enable_disk_cache(module, [source])
        return module

    module = fresh_module()
    assert module.plus_one(1) == 2 and module.times_two(3) == 6
    suffix, corrupt = NUMBA_DAMAGE[damage]
    [target] = [p for p in (tmp_path / "numba").rglob(f"*plus_one*.{suffix}")]
    corrupt(target)

    module = fresh_module()
    with caplog.at_level(logging.WARNING, logger=kernel_cache.__name__):
        assert module.plus_one(1) == 2 and module.times_two(3) == 6
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and str(target) in warnings[0], warnings
    assert sum(module.times_two.stats.cache_hits.values()) == 1  # the undamaged kernel kept its cache
    assert not module.plus_one.stats.cache_hits

    caplog.clear()
    module = fresh_module()
    with caplog.at_level(logging.WARNING, logger=kernel_cache.__name__):
        assert module.plus_one(1) == 2
    if damage.endswith("directory"):
        assert target.is_dir() and not module.plus_one.stats.cache_hits
    else:
        assert sum(module.plus_one.stats.cache_hits.values()) == 1, "the damaged entry was not replaced"
        assert not caplog.records
    sys.modules.pop("tiny_damaged", None)


# ---- the node's configure (subprocesses: fresh numba and JAX state) --------------------------------------------
# ---- a damaged JAX compilation cache entry is a miss: compiled again, one warning naming the file, replaced ------
# One program through the node's JAX set-up (jax_cache.enable_cache) in a fresh process: its log lines ("WARN ...")
# and JAX's own warnings on stdout, then the program's result.
JAX_PROGRAM = textwrap.dedent("""
    import logging, sys, warnings
    import jax, jax.numpy as jnp
    from bayes_infer_ros.inference import jax_cache

    class Out(logging.Handler):
        def emit(self, record): print("WARN", record.getMessage(), flush=True)

    jax_cache.log.addHandler(Out())
    jax_cache.log.propagate = False
    warnings.showwarning = lambda m, *a, **k: print("JAXWARN", m, flush=True)
    assert jax_cache.enable_cache(sys.argv[1])

    @jax.jit
    def damaged_probe(x):
        return jnp.sin(x) * 2 + 1

    print("RESULT", float(damaged_probe(jnp.float32(0.5))))
""")


def _zlib_of_garbage(path: Path) -> None:
    import zlib

    path.write_bytes(zlib.compress(b"\0\0\0\1" + b"not an executable" * 20))


JAX_DAMAGE = {"first_byte": _damage_byte(0, -1), "middle_byte": _damage_byte(-40, -1), "truncated": _truncate,
              "empty": _empty, "directory": _directory, "valid_compression_of_garbage": _zlib_of_garbage}


@pytest.mark.heavy
@pytest.mark.parametrize("damage", list(JAX_DAMAGE))
def test_a_damaged_jax_cache_entry_is_compiled_again_with_one_warning_naming_it(tmp_path, damage):
    """JAX reads a damaged entry as a miss and warns without naming the file; its cache never replaces an entry
    that exists, so the damage stayed and every start warned. Now one WARNING names the file, the entry is removed
    and written again, the cache stays on for the other programs, and the next process reads it without a warning
    (a directory in the entry's place cannot be removed: named, and the program compiles at every start)."""
    folder = tmp_path / "jax"

    def run() -> tuple[list[str], list[str]]:
        proc = subprocess.run([sys.executable, "-c", JAX_PROGRAM, str(folder)], capture_output=True, text=True,
                              env={**os.environ, "JAX_PLATFORMS": "cpu"}, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        lines = proc.stdout.splitlines()
        [result] = [float(line.split()[1]) for line in lines if line.startswith("RESULT")]
        assert abs(result - (2 * math.sin(0.5) + 1)) <= FLOAT32_ATOL, proc.stdout
        return only(lines, "WARN "), only(lines, "JAXWARN")

    assert run() == ([], [])
    [entry] = folder.glob("jit_damaged_probe-*-cache")
    JAX_DAMAGE[damage](entry)
    warns, _ = run()
    assert len(warns) == 1 and str(entry) in warns[0] and "jax_compilation_cache_dir" in warns[0], warns
    warns, jax_warns = run()
    if damage == "directory":
        assert entry.is_dir() and len(warns) == 1 and str(entry) in warns[0], warns
    else:
        assert warns == [] and jax_warns == [], (warns, jax_warns)
        assert entry.is_file()


# ---- bayes-infer warmup ------------------------------------------------------------------------------------------
@pytest.mark.heavy
def test_warmup_with_an_unwritable_jax_cache_exits_0_with_one_warning(tmp_path):
    """The CLI runs configure's work (variant baseline here: no numba) and exits 0; the unwritable cache folder is
    one WARNING naming jax_compilation_cache_dir."""
    import yaml

    (tmp_path / "file").write_text("x")
    doc = yaml.safe_load((REPO / "config" / "agent.yaml").read_text())
    doc["/**"]["ros__parameters"].update({"variant": "baseline",
                                          "jax_compilation_cache_dir": str(tmp_path / "file" / "jax")})
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(doc))
    proc = subprocess.run([sys.executable, "-m", "bayes_infer_ros.cli", "warmup", "--params-file", str(params)],
                          env={**os.environ, "JAX_PLATFORMS": "cpu"}, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "variant baseline" in proc.stdout
    warnings = [line for line in proc.stderr.splitlines() if "WARNING" in line]
    assert len(warnings) == 1 and "jax_compilation_cache_dir" in warnings[0] and "Not a directory" in warnings[0]


@pytest.mark.heavy
def test_warmup_reports_a_broken_params_file_with_exit_1(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("/**:\n  ros__parameters:\n    variant: baseline\n")  # no model
    proc = subprocess.run([sys.executable, "-m", "bayes_infer_ros.cli", "warmup", "--params-file", str(params)],
                          env={**os.environ, "JAX_PLATFORMS": "cpu"}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "no model" in proc.stderr


@pytest.mark.numba
def test_warmup_verifies_and_keeps_the_decision_so_the_next_configure_verifies_nothing(tmp_path):
    """warmup waits for variant auto's verify step (a child process) and keeps its answer: the node's next configure
    (same decision cache) starts the verified engine with nothing left to verify."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "BAYES_INFER_DECISION_CACHE": str(tmp_path / "decisions")}
    params = REPO / "config" / "agent.yaml"  # fpi: the default model is near training models where baseline is close
    proc = subprocess.run([sys.executable, "-m", "bayes_infer_ros.cli", "warmup", "--params-file", str(params)],
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "verifying baseline@cpu off the tick path" in proc.stdout, proc.stdout
    assert "timed here: fused_numba@cpu" in proc.stdout, proc.stdout
    assert len(list((tmp_path / "decisions").glob("*.json"))) == 1
    again = subprocess.run([sys.executable, "-c", CONFIGURE, str(params)], env=env, capture_output=True, text=True,
                           timeout=600)
    result = json.loads(again.stdout.strip().splitlines()[-1])
    assert "decision cache" in result["note"] and "verifying" not in result["note"], result
