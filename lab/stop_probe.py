"""SIGINT (or SIGTERM) at many moments of a node's start-up, each exit's status and time counted: the probe of
issue 45's "a stop at any moment is clean and bounded" (``test/ros/test_stop_anytime.py``).

Each trial starts ``agent_node`` as ``ros2 run`` would (``lab.agent_process``), sends the signal ``delay_s`` after
the spawn and waits for the exit. Several trials run at once, each with its own delay, so a sweep of the whole
start-up (imports, ``rclpy.init``, the node's constructor, configure's build, activate, the verify step's child)
costs a few start-ups of wall time. A trial is *clean* when the node exits with the expected status within the
bound and its log holds no traceback, no ``Exception ignored`` and no native crash report. A trial without a delay
sends no signal (a start that ends by itself, e.g. a refused configure in plain mode).

``python -m lab stop-probe [--plain] [--trials N] [--first S] [--last S] [--parallel K] [--signal INT|TERM]
[--no-signal] [--expect STATUS] [--params-file F ...] [-p name:=value ...] [--keep DIR]`` runs a sweep, prints one
line per trial and the counts, and exits 1 when a trial was not clean.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import yaml

from lab import agent_process

REPO_ROOT = Path(__file__).resolve().parents[1]

#: What a log must not hold after a stop (Python tracebacks, errors Python could only print, native crashes).
UNCLEAN_MARKERS = ("Traceback", "Exception ignored", "Fatal Python error", "terminate called", "Segmentation fault",
                   "Aborted", "core dumped")
#: Seconds after the signal (after the spawn, without one) past which a node still running is hung (then killed).
HANG_S = 20.0
#: The product's promise (docs/node.md, "Stopping"): seconds from the signal to the end of the process.
BOUND_S = 5.0


@dataclass(frozen=True)
class StopTrial:
    """One start (and stop). ``delay_s``: the signal's delay after the spawn (None: no signal); ``status``: the exit
    status (negative: killed by that signal), None when it hung; ``exit_s``: seconds from the signal to the exit
    (None: hung, no signal, or it ended before the signal); ``log``: its stdout and stderr."""

    mode: str
    delay_s: Optional[float]
    status: Optional[int]
    exit_s: Optional[float]
    log: str

    @property
    def phase(self) -> str:
        """The last start-up milestone its log shows: ``none``, ``configured`` or ``active``."""
        if "active: tick" in self.log:
            return "active"
        return "configured" if "configured in" in self.log else "none"

    def problem(self, expected_status: int = 0, bound_s: float = BOUND_S) -> Optional[str]:
        """What was wrong (None: clean): ``hang``, the first unclean log marker, ``status N``, ``ended before the
        signal`` or ``slow X s`` (the exit came more than ``bound_s`` after the signal)."""
        if self.status is None:
            return "hang"
        marker = next((m for m in UNCLEAN_MARKERS if m in self.log), None)
        if marker is not None:
            return marker
        if self.status != expected_status:
            return f"status {self.status}"
        if self.delay_s is not None and self.exit_s is None:
            return "ended before the signal"
        if self.exit_s is not None and self.exit_s > bound_s:
            return f"slow {self.exit_s:.2f} s"
        return None


def spread(count: int, first_s: float, last_s: float) -> list[float]:
    """``count`` delays evenly spaced from ``first_s`` to ``last_s`` (inclusive)."""
    if count == 1:
        return [first_s]
    return [first_s + (last_s - first_s) * k / (count - 1) for k in range(count)]


def interleave(count: int, parallel: int) -> list[int]:
    """The indices ``0..count-1`` in an order that starts ``parallel`` trials of far-apart delays together (every
    ``ceil(count / parallel)``-th in turn), so each batch loads the machine alike across the sweep."""
    stride = max(1, -(-count // parallel))
    return [i for start in range(stride) for i in range(start, count, stride)]


def _set_dotted(params: dict, name: str, value: Any) -> None:
    """``params[a][b][c] = value`` for the parameter name ``a.b.c``."""
    *path, leaf = name.split(".")
    for key in path:
        params = params.setdefault(key, {})
    params[leaf] = value


def _merge(into: dict, extra: dict) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def stop_params(folder: Path, params_files: Sequence[Path] = (), overrides: Optional[dict] = None) -> Path:
    """A params file for the sweep, written to ``folder``: config/agent.yaml's parameters, each of ``params_files``'
    merged over them, ``variant: auto``, ``autostart: true`` and a JAX cache in ``folder``, then ``overrides``
    (parameter name -> value; a dotted name is nested)."""
    params = yaml.safe_load((REPO_ROOT / "config" / "agent.yaml").read_text())["/**"]["ros__parameters"]
    for path in params_files:
        _merge(params, yaml.safe_load(Path(path).read_text())["/**"]["ros__parameters"])
    params.update({"variant": "auto", "autostart": True, "jax_compilation_cache_dir": str(folder / "jax_cache")})
    for name, value in (overrides or {}).items():
        _set_dotted(params, name, value)
    out = folder / "stop_probe_params.yaml"
    out.write_text(yaml.safe_dump({"/**": {"ros__parameters": params}}, sort_keys=False))
    return out


def private_env(folder: Path, base: Optional[dict] = None) -> dict[str, str]:
    """Loopback DDS (``base``'s domain id when valid, else a random one), a decision cache in ``folder`` (each node
    decides and verifies as on a first start, sharing no kept decision with the user's), ROS logs in ``folder``,
    and output written as it is made (a crash loses none)."""
    env = agent_process.loopback_env(base=base)
    env.update({"BAYES_INFER_DECISION_CACHE": str(folder / "decisions"), "ROS_LOG_DIR": str(folder / "ros_log"),
                "RCUTILS_LOGGING_BUFFERED_STREAM": "0", "PYTHONUNBUFFERED": "1"})
    return env


class _Running:
    """One trial in flight: its process, when it was signalled and when it ended."""

    def __init__(self, proc: agent_process.AgentProcess, mode: str, delay_s: Optional[float]):
        self.proc, self.mode, self.delay_s = proc.start(), mode, delay_s
        self.signalled: Optional[float] = None
        self.ended: Optional[float] = None

    def step(self, sig: int, now: float) -> None:
        """Signal once the delay has passed (if it is still running); note the exit."""
        if self.ended is None and self.proc.proc.poll() is not None:
            self.ended = now
        due = self.delay_s is not None and now - self.proc.started >= self.delay_s
        if due and self.signalled is None and self.ended is None:
            self.signalled = now
            try:
                self.proc.proc.send_signal(sig)
            except ProcessLookupError:  # it ended meanwhile
                pass

    def hung(self, now: float, hang_s: float) -> bool:
        since = self.signalled if self.delay_s is not None else self.proc.started
        return self.ended is None and since is not None and now - since > hang_s

    def finish(self) -> StopTrial:
        """Kill what is left of its process group (a hung node, an orphaned child) and read the log."""
        status = self.proc.proc.poll()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.proc.wait(5)
        exit_s = None if status is None or self.signalled is None else max(0.0, self.ended - self.signalled)
        log = self.proc.log_text()
        self.proc.stop(timeout=1.0)
        return StopTrial(self.mode, self.delay_s, status, exit_s, log)


def run_trials(params_file: Path, delays: Sequence[Optional[float]], folder: Path, *, plain: bool = False,
               parallel: int = 4, sig: int = signal.SIGINT, hang_s: float = HANG_S,
               env: Optional[dict] = None) -> list[StopTrial]:
    """Start one node per delay (``parallel`` at a time, in :func:`interleave`'s order; each its own node name),
    signal each ``delay`` seconds after its spawn (None: never), and return the trials in the order of ``delays``.
    Logs go to ``folder``; ``env`` defaults to :func:`private_env`."""
    mode = "plain" if plain else "lifecycle"
    env = env if env is not None else private_env(folder)
    queue = interleave(len(delays), parallel)
    running: dict[int, _Running] = {}
    done: dict[int, StopTrial] = {}
    while queue or running:
        while queue and len(running) < parallel:
            k = queue.pop(0)
            proc = agent_process.AgentProcess(params_file, env=env, log_path=folder / f"{mode}_{k:03d}.log",
                                              name=f"stop_{k}", extra_args=["--plain"] if plain else [])
            running[k] = _Running(proc, mode, delays[k])
        time.sleep(0.005)
        now = time.monotonic()
        for k, trial in list(running.items()):
            trial.step(sig, now)
            if trial.ended is not None or trial.hung(now, hang_s):
                done[k] = running.pop(k).finish()
    return [done[k] for k in range(len(delays))]


def summary(trials: Sequence[StopTrial], expected_status: int = 0, bound_s: float = BOUND_S) -> str:
    """One line per trial, then the counts of statuses, outcomes and phases, and the slowest exit."""
    lines = []
    for t in trials:
        delay = "   -  " if t.delay_s is None else f"{t.delay_s:5.2f} s"
        exit_s = "   -  " if t.exit_s is None else f"{t.exit_s:5.2f} s"
        lines.append(f"{t.mode:9s} delay {delay}  status {str(t.status):4s}  exit {exit_s}  phase {t.phase:10s}  "
                     + (t.problem(expected_status, bound_s) or "clean"))
    outcomes = Counter(t.problem(expected_status, bound_s) or "clean" for t in trials)
    slowest = max((t.exit_s for t in trials if t.exit_s is not None), default=0.0)
    lines.append(f"statuses {dict(Counter(str(t.status) for t in trials))}; outcomes {dict(outcomes)}; "
                 f"phases {dict(Counter(t.phase for t in trials))}; slowest exit {slowest:.2f} s")
    return "\n".join(lines)


def _overrides(pairs: Sequence[str]) -> dict:
    """``name:=value`` pairs (values read as YAML, as ``-p`` does) -> {name: value}."""
    out = {}
    for pair in pairs:
        name, _, value = pair.partition(":=")
        out[name] = yaml.safe_load(value)
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab stop-probe", description=__doc__.split("\n\n")[0])
    parser.add_argument("--plain", action="store_true", help="plain-node mode (default: lifecycle, autostart)")
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--first", type=float, default=0.1, help="the first delay after the spawn, s")
    parser.add_argument("--last", type=float, default=3.0, help="the last delay after the spawn, s")
    parser.add_argument("--parallel", type=int, default=4, help="trials running at once")
    parser.add_argument("--signal", choices=("INT", "TERM"), default="INT")
    parser.add_argument("--no-signal", action="store_true", help="send none: each start ends by itself")
    parser.add_argument("--expect", type=int, default=0, help="the exit status of a clean end")
    parser.add_argument("--params-file", type=Path, action="append", default=[],
                        help="merged over config/agent.yaml (repeatable)")
    parser.add_argument("-p", dest="params", action="append", default=[], metavar="NAME:=VALUE")
    parser.add_argument("--keep", type=Path, default=None, help="a folder for the logs (default: a temporary one)")
    args = parser.parse_args(argv)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="stop_probe_"))
    folder.mkdir(parents=True, exist_ok=True)
    params_file = stop_params(folder, args.params_file, _overrides(args.params))
    delays = [None] * args.trials if args.no_signal else spread(args.trials, args.first, args.last)
    t0 = time.monotonic()
    trials = run_trials(params_file, delays, folder, plain=args.plain, parallel=args.parallel,
                        sig=getattr(signal, f"SIG{args.signal}"))
    print(summary(trials, args.expect))
    print(f"{len(trials)} trials in {time.monotonic() - t0:.1f} s; logs in {folder}; load {os.getloadavg()}")
    return 0 if all(t.problem(args.expect) is None for t in trials) else 1


if __name__ == "__main__":
    sys.exit(main())
