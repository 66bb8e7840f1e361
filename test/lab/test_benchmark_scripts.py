"""Every measurement command still runs: each Python script under benchmarks/ and each of the lab's measurement
commands answers ``--help``, each shell script parses, and every option a shell script (or benchmarks/README.md,
README.md, docs/autotune.md) passes to a ``python -m lab`` command or a benchmarks/ script is one that command still
has."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
SCRIPTS = sorted(p for p in BENCH.glob("*.py") if p.name != "tick_inputs.py")  # tick_inputs: a module, no CLI
SHELL = sorted(BENCH.glob("*.sh"))
# the lab's measurement commands (the demo needs a ROS graph)
SUBCOMMANDS = ("generate", "bench", "bench-variants", "report", "autotune-train", "readme-tables", "bench-unseen",
               "bench-fleet", "first-start", "compile-times", "scale")

# One process for every --help: each script's main runs with argv [script, --help] (runpy), each subcommand's
# module's main with ["--help"]; prints {name: [exit code, help text]} as JSON.
HELPER = r"""
import contextlib, importlib, io, json, runpy, sys
out = {}
scripts, subcommands = json.loads(sys.argv[1])
from lab.__main__ import COMMANDS
def run(name, fn):
    buf = io.StringIO()
    code = 0
    try:
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            fn()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException as exc:  # noqa: BLE001 - reported, not raised
        code, _ = 1, buf.write(f"{type(exc).__name__}: {exc}")
    out[name] = [code, buf.getvalue()]
for path in scripts:
    def go(path=path):
        sys.argv = [path, "--help"]
        sys.path.insert(0, path.rsplit("/", 1)[0])  # as `python benchmarks/x.py` puts the script's folder first
        try:
            runpy.run_path(path, run_name="__main__")
        finally:
            sys.path.pop(0)
    run(path, go)
for sub in subcommands:
    run(sub, lambda sub=sub: importlib.import_module("lab." + COMMANDS[sub][0]).main(["--help"]))
print("\n@@JSON@@" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def helps() -> dict[str, tuple[int, str]]:
    args = json.dumps([[str(p) for p in SCRIPTS], list(SUBCOMMANDS)])
    env = {"JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    import os
    r = subprocess.run([sys.executable, "-c", HELPER, args], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, **env}, timeout=600)
    assert "@@JSON@@" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    return {k: tuple(v) for k, v in json.loads(r.stdout.split("@@JSON@@", 1)[1]).items()}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_python_script_answers_help(helps, script):
    code, text = helps[str(script)]
    assert code == 0 and "usage" in text.lower(), f"{script.name} --help: exit {code}\n{text[-1500:]}"


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_lab_command_answers_help(helps, command):
    code, text = helps[command]
    assert code == 0 and f"python -m lab {command}" in text, f"python -m lab {command} --help: exit {code}\n{text[-1500:]}"


@pytest.mark.parametrize("script", SHELL, ids=lambda p: p.name)
def test_shell_script_parses(script):
    r = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


COMMAND = re.compile(r"python3? -m lab +([a-z-]+)(.*)|python3? +(benchmarks/[a-z_0-9]+\.py)(.*)")


def _commands(text: str) -> list[tuple[str, list[str]]]:
    """(subcommand or script path, its --options) for every command line in ``text`` (continuations joined)."""
    text = re.sub(r"\\\n", " ", text)
    out = []
    for line in text.splitlines():
        line = line.split(" #")[0].split("|")[0].split(">")[0]
        for m in COMMAND.finditer(line):
            name, rest = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            out.append((name, re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", rest)))
    return out


@pytest.mark.parametrize("source", SHELL + [BENCH / "README.md", ROOT / "README.md", ROOT / "docs" / "autotune.md"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_options_passed_exist(helps, source):
    unknown = []
    for name, options in _commands(source.read_text()):
        key = str(ROOT / name) if name.startswith("benchmarks/") else name
        if key not in helps:
            continue  # a command this test does not run (the node, replay, demo)
        text = helps[key][1]
        unknown += [f"{name} {o}" for o in options if o != "--help" and not re.search(rf"{re.escape(o)}\b", text)]
    assert unknown == [], f"{source.name} passes options its commands do not have: {unknown}"


def test_the_option_check_finds_an_unknown_option(helps):
    """The check can fail: the removed run_cpu.sh passed --min-time to bench-variants."""
    cmds = _commands("python -m lab bench-variants --cache X \\\n    --min-time 0.1 --max-minutes 3\n")
    assert cmds == [("bench-variants", ["--cache", "--min-time", "--max-minutes"])]
    assert "--min-time" not in helps["bench-variants"][1] and "--max-minutes" in helps["bench-variants"][1]


def test_gpu_crossover_compares_gpu_host_cpu_and_auto():
    """gpu_crossover.py: the best GPU candidate per row (pymdp, fused_numba and auto are not GPU candidates), the
    crossover (the smallest size from which the GPU wins every larger configuration) and auto against the fastest."""
    sys.path.insert(0, str(BENCH))
    try:
        import gpu_crossover as gc
    finally:
        sys.path.remove(str(BENCH))

    def row(cfg, variant, ms, params=0, reason=""):
        return {"status": "ok", "algorithm": "fpi", "config_id": cfg, "variant": variant, "time_s": str(ms / 1e3),
                "param_count": str(params), "reason": reason}
    rows = []
    for cfg, params, gpu_ms, cpu_ms in [("small", 100, 0.5, 0.02), ("mid", 10_000, 1.0, 2.0), ("big", 1e6, 2.0, 50.0)]:
        rows += [row(cfg, "pymdp", 3.0, params), row(cfg, "baseline", gpu_ms * 2), row(cfg, "fused_dense", gpu_ms),
                 row(cfg, "fused_numba", cpu_ms), row(cfg, "auto", min(gpu_ms, cpu_ms) * 1.02, reason="chose x@gpu")]
    tab = gc.table(rows, "time_s")
    big = tab[("fpi", "big")]
    assert big["gpu"] == ("fused_dense", 2.0e-3) and big["cpu"] == 50e-3 and big["auto"][0] == "x@gpu"
    cells = [(c["params"], c) for c in tab.values()]
    assert gc.crossover(cells).startswith("10,000 parameters (above 100)")
    rows[-2]["time_s"] = "0.001"  # the host CPU wins the largest one
    assert gc.crossover([(c["params"], c) for c in gc.table(rows, "time_s").values()]).startswith("none")


def test_the_scale_headline_counts_what_was_timed():
    """crossover.headline: the best GPU candidate over pymdp only where both were timed, auto over the fastest of the
    GPU and the host CPU, and a configuration whose pymdp was not timed left out of the ratio."""
    from lab import crossover

    def row(cfg, variant, ms, params=0, status="ok"):
        return {"status": status, "algorithm": "mmp", "config_id": cfg, "variant": variant, "time_s": str(ms / 1e3),
                "param_count": str(params), "reason": "chose v@gpu" if variant == "auto" else ""}
    rows = [row("a", "pymdp", 4.0, 100), row("a", "hybrid_block", 1.0), row("a", "fused_numba", 2.0),
            row("a", "auto", 1.1),
            row("b", "pymdp", 9.0, 200, status="skipped_compile"), row("b", "hybrid_block", 3.0),
            row("b", "fused_numba", 1.5)]
    h = crossover.headline(rows)["mmp"]
    assert h["gpu_x"] == [4.0]  # b's pymdp was not timed
    assert h["auto"] == [1.1]
    assert h["crossover"].startswith("none")  # the host CPU wins b, the largest
