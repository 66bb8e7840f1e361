"""``cli/stop_signal.py``: SIGINT and SIGTERM are a stop request, never an exception, and the bound that ends the
process is armed by the signal itself, whatever the main thread is doing (issue 45, F1 and F4). Each process test
runs a small Python program that installs it; the node's own sweep is test/ros/test_stop_anytime.py."""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

from bayes_infer_ros.cli.stop_signal import StopSignal

pytestmark = pytest.mark.heavy

# Waits in Python until the stop is requested, then ends as the node does.
POLLS = """
    import time
    from bayes_infer_ros.cli import stop_signal
    stop = stop_signal.install(bound_s=60.0)
    stop.on_stop(lambda: print("callback", flush=True))
    print("ready", flush=True)
    while not stop.requested:
        time.sleep(0.01)
    print("stopped", flush=True)
    stop_signal.exit_now(0)
"""

# Waits inside a system call that never returns to the interpreter (as the main thread waits inside rcl_wait): only
# the bound can end it.
NEVER_RETURNS = """
    import os
    from bayes_infer_ros.cli import stop_signal
    stop = stop_signal.install(bound_s=0.5)
    stop.on_stop(lambda: print("callback", flush=True))
    read_fd, _ = os.pipe()
    print("ready", flush=True)
    os.read(read_fd, 1)
    print("returned", flush=True)
"""


def _run_and_signal(program: str, signum: int) -> tuple[int, str, str]:
    """Start ``program``, send ``signum`` once it printed "ready": (status, stdout, stderr)."""
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(program)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)  # a hang detector, not a timing claim
    finally:
        proc.kill()
    return proc.returncode, out, err


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_is_a_stop_request_not_an_exception(signum):
    status, out, err = _run_and_signal(POLLS, signum)
    assert (status, out.split()) == (0, ["callback", "stopped"]), (status, out, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_the_signal_arms_the_bound_even_when_the_main_thread_never_returns(signum):
    """The stop callbacks run in the watcher thread, and the process ends with status 0 at the bound, though the
    main thread never runs Python again (before, the bound was armed only once the spin loop ended)."""
    status, out, err = _run_and_signal(NEVER_RETURNS, signum)
    assert (status, out.split()) == (0, ["callback"]), (status, out, err)
    assert "Traceback" not in err, err


def test_a_callback_added_after_the_request_runs_at_once_and_each_runs_once():
    stop, calls = StopSignal(bound_s=1.0), []

    def fails() -> None:
        calls.append("fails")
        raise RuntimeError("an executor already shut down")

    stop.on_stop(fails)
    stop.on_stop(lambda: calls.append("before"))
    assert not stop.requested and calls == []
    stop.request()
    stop.request()  # idempotent: a second signal calls nothing again
    assert stop.requested and calls == ["fails", "before"]  # a failing callback does not stop the others
    stop.on_stop(lambda: calls.append("after"))
    assert calls == ["fails", "before", "after"]
