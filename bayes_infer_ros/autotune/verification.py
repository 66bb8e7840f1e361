"""The verify step off the tick path: a child process builds and times a plan's candidates
(``deployment.verify_candidates``) and reports their timings back, so their compiles neither stall the node nor stay
resident in it (the child's memory goes when it exits). This process then concludes (``decision.conclude``: the
start is replaced only by a candidate that wins beyond the measured noise; the answer is kept in the decision cache)
and hands the :class:`~bayes_infer_ros.autotune.decision.Outcome` to ``on_done``, which deploys the winner where it
says so.

    job = Verification(model, plan, on_done, cache=cache, jax_cache_dir="~/.cache/bayes_infer_ros/jax").start()
    job.status   # "verifying baseline@cpu against fused_numba@cpu off the tick path (child process 4242, 1.3 s)"
    job.cancel()       # the node was cleaned up, or builds another engine: the child is killed, on_done never runs
    job.wait(timeout)  # the Outcome (``bayes-infer warmup`` waits for it; the node never does)

The child is ``python -c`` importing this module and calling :func:`serve`: it lowers its priority
(``VERIFY_NICENESS``: the node and the rest of the robot come first), reads one pickled :class:`VerifyRequest` on
stdin, sets up JAX with the node's persistent compilation cache (a winner the node builds afterwards is compiled
already), finds the devices, times the candidates and writes one pickled answer on stdout. numba's kernel cache is
shared through the environment. It stops by itself when this process is gone. ``in_process=True`` does the same
work in a thread of this process instead (tests with engines that behave differently on purpose).
"""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import bayes_infer_ros

from ..inference import jax_cache
from .decision import Candidate, DecisionCache, EngineConfig, Outcome, Plan, conclude
from .deployment import verify_candidates
from .devices import find_devices
from .timing import CandidateTiming

#: The child's niceness (the lowest): it takes a CPU that the node, or anything else at normal priority, leaves idle.
VERIFY_NICENESS = 19
#: A verify step that has not answered after this long is stopped; the start keeps running.
VERIFY_TIMEOUT_S = 900.0
#: The child's program. ``python -c`` puts the working directory first on sys.path; it is taken off, so the child
#: imports this package from where this process did (``child_environment``), never a source tree it was started in.
#: That also shares numba's kernel cache, whose folder is named by the kernels' source folder: a child importing
#: another copy would compile every kernel again.
CHILD_CODE = ("import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
              "from bayes_infer_ros.autotune.verification import serve; serve()")

Answer = tuple[dict[str, CandidateTiming], dict[str, str]]


@dataclass(frozen=True)
class VerifyRequest:
    """What the child needs: the model, the engine settings, the candidates to time (the start first) and the
    JAX compilation cache folder ("": none)."""

    model: Any
    config: EngineConfig
    timed: tuple[Candidate, ...]
    jax_cache_dir: str = ""


def verify_request(request: VerifyRequest, checkpoint: Callable[[], None] = lambda: None) -> Answer:
    """The child's work: JAX set-up, the devices ``request.config.device`` allows, the timing."""
    jax_cache.setup_jax("cpu", request.jax_cache_dir)
    found = find_devices(request.config.device)
    return verify_candidates(request.model, request.config, request.timed, found, checkpoint)


class ParentGone(Exception):
    """The process that asked for the verify step has exited."""


def serve() -> None:
    """The child process's entry: one pickled VerifyRequest on stdin, one pickled ("ok", answer) or ("error", why)
    on stdout. Whatever else writes to stdout (a library's print) goes to stderr instead."""
    answer_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    parent = os.getppid()
    try:
        os.nice(VERIFY_NICENESS)
    except OSError:  # not permitted here: run at the node's priority
        pass

    def parent_alive() -> None:
        if os.getppid() != parent:
            raise ParentGone("the node exited")

    try:
        answer: tuple[str, Any] = ("ok", verify_request(pickle.load(sys.stdin.buffer), parent_alive))
    except BaseException as exc:  # noqa: BLE001 - reported to the node, which keeps its engine
        answer = ("error", f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
    answer_out.write(pickle.dumps(answer))
    answer_out.flush()


def child_environment() -> dict[str, str]:
    """This process's environment, with the folders this package was imported from first on PYTHONPATH (a test
    or a source checkout may have put them on sys.path only)."""
    roots = [str(Path(p).parent) for p in bayes_infer_ros.__path__]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(roots + [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                                               if p]))
    return env


class Verification:
    """One verify step of ``plan`` off the tick path (see the module docstring). ``on_done(outcome)`` runs in this
    job's thread once, unless cancelled first; an exception from it is kept in ``error``."""

    def __init__(self, model: Any, plan: Plan, on_done: Callable[[Outcome], None], *,
                 cache: Optional[DecisionCache] = None, jax_cache_dir: str = "", in_process: bool = False):
        self.plan = plan
        self._request = VerifyRequest(model, plan.config, plan.timed, jax_cache_dir)
        self._on_done, self._cache, self._in_process = on_done, cache, in_process
        self._lock = threading.Lock()
        self._proc: Optional[subprocess.Popen] = None
        self._cancelled = threading.Event()
        self._done = threading.Event()
        self._started: Optional[float] = None
        self.outcome: Optional[Outcome] = None
        self.error = ""
        self._thread = threading.Thread(target=self._run, name="verify", daemon=True)

    def start(self) -> "Verification":
        self._started = time.monotonic()
        self._thread.start()
        return self

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    @property
    def pid(self) -> Optional[int]:
        """The child's process id (None before it started, and with ``in_process``)."""
        proc = self._proc
        return proc.pid if proc is not None else None

    @property
    def status(self) -> str:
        """What the verify step is doing, or how it ended (for the log and diagnostics)."""
        if self.outcome is not None:
            return self.outcome.reason
        if self.cancelled:
            return f"verify step of {', '.join(map(str, self.plan.verify))} cancelled"
        where = "in this process" if self._in_process else f"child process {self.pid or '(starting)'}"
        elapsed = time.monotonic() - self._started if self._started is not None else 0.0
        return (f"verifying {', '.join(map(str, self.plan.verify))} against {self.plan.start} off the tick path "
                f"({where}, {elapsed:.1f} s)")

    def cancel(self) -> None:
        """Stop the verify step (its child is killed); ``on_done`` is not called after this returns."""
        with self._lock:
            self._cancelled.set()
            proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()

    def wait(self, timeout: Optional[float] = None) -> Optional[Outcome]:
        """The outcome once the verify step ended (None: cancelled, or not done within ``timeout`` s)."""
        self._done.wait(timeout)
        return self.outcome

    # ---- the job's thread ----------------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            try:
                timings, errors = self._here() if self._in_process else self._in_child()
                outcome = conclude(self.plan, timings, errors, self._cache)
            except Exception as exc:  # noqa: BLE001 - the start keeps running; the log says why
                outcome = Outcome(self.plan.start, False, {}, {}, f"keeps {self.plan.start}: the verify step failed "
                                                                  f"({' '.join(str(exc).split())[:300]})")
            with self._lock:
                if self._cancelled.is_set():
                    return
                self.outcome = outcome
            try:
                self._on_done(outcome)
            except Exception as exc:  # noqa: BLE001 - kept for the owner; the thread must end
                self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self._done.set()

    def _here(self) -> Answer:
        def checkpoint() -> None:
            if self._cancelled.is_set():
                raise RuntimeError("cancelled")

        found = find_devices(self._request.config.device)
        return verify_candidates(self._request.model, self._request.config, self._request.timed, found, checkpoint)

    def _in_child(self) -> Answer:
        with self._lock:
            if self._cancelled.is_set():
                raise RuntimeError("cancelled")
            self._proc = proc = subprocess.Popen([sys.executable, "-c", CHILD_CODE], stdin=subprocess.PIPE,
                                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                 env=child_environment())
        try:
            out, err = proc.communicate(pickle.dumps(self._request), timeout=VERIFY_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise RuntimeError(f"no answer after {VERIFY_TIMEOUT_S:g} s") from None
        try:
            kind, answer = pickle.loads(out)
        except Exception:  # noqa: BLE001 - the child died before answering (killed, out of memory, a crash)
            tail = " ".join(err.decode(errors="replace").split())[-300:]
            raise RuntimeError(f"the verify process exited with {proc.returncode}: {tail}") from None
        if kind != "ok":
            raise RuntimeError(answer)
        return answer
