"""node/deployer.py: the coalescing worker off the tick path (requests coalesced, only the newest installed,
cancelled at close or on request, a failure reported once) and the memory budget every deployment is held to."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from bayes_infer_ros.autotune.select import MemoryBudgetExceeded, estimated_bytes
from bayes_infer_ros.node.deployer import BuildCancelled, Worker
from bayes_infer_ros.node.parameters import node_budget


class _Gate:
    """A fake build whose phases wait on events the test releases."""

    def __init__(self):
        self.started = []
        self.release = threading.Event()
        self.entered = threading.Event()
        self.installed = []
        self.errors = []

    def build(self, config, checkpoint):
        self.started.append(config)
        self.entered.set()
        self.release.wait(10)
        checkpoint()
        if config == "bad":
            raise ValueError("refused")
        return f"engine:{config}"

    def install(self, result, ticket):
        self.installed.append(result)

    def on_error(self, ticket, exc):
        self.errors.append((ticket.config, exc))


def test_builds_are_coalesced_and_only_the_newest_is_installed():
    g = _Gate()
    b = Worker(g.build, g.install, g.on_error)
    first = b.request(0)
    assert g.entered.wait(10)
    tickets = [b.request(k) for k in range(1, 30)]  # 29 more while the first is in its "compile"
    g.release.set()
    assert tickets[-1].wait(10) == "engine:29"
    assert first.wait(10) == "engine:29"  # a replaced request's waiter gets the newest result
    assert g.installed == ["engine:29"]
    assert g.started == [0, 29]  # the first was cancelled at its checkpoint, 1..28 never started
    assert b.counts == {"requested": 30, "started": 2, "finished": 1, "cancelled": 1, "failed": 0}
    b.close("done")


def test_close_cancels_waiters_and_returns_at_once():
    g = _Gate()
    b = Worker(g.build, g.install, g.on_error)
    ticket = b.request("slow")
    assert g.entered.wait(10)
    assert b.close("the node was cleaned up") is True  # a build was still running
    with pytest.raises(BuildCancelled, match="cleaned up"):
        ticket.wait(5)
    with pytest.raises(BuildCancelled):
        b.request("after").wait(5)
    g.release.set()
    b._thread.join(10)
    assert not b.thread_alive and g.installed == [] and b.counts["cancelled"] == 1
    assert b._thread.daemon  # never holds up the interpreter's exit


def test_a_failed_build_is_reported_once():
    g = _Gate()
    g.release.set()
    b = Worker(g.build, g.install, g.on_error)
    with pytest.raises(ValueError, match="refused"):
        b.request("bad").wait(10)
    assert [c for c, _ in g.errors] == ["bad"] and b.counts["failed"] == 1
    assert b.request("ok").wait(10) == "engine:ok"
    b.close("done")


def test_wait_aborts_when_told():
    g = _Gate()
    b = Worker(g.build, g.install, g.on_error)
    ticket = b.request("slow")
    with pytest.raises(BuildCancelled, match="shutting down"):
        ticket.wait(10, abort=lambda: True)
    b.close("done")
    g.release.set()


def test_memory_budget_applies_to_an_explicit_variant():
    from bayes_infer_ros.model import GenerativeModel

    n, M, m = 1000, 200, 10
    A = [np.broadcast_to(np.full((m, 1), 1.0 / m, np.float32), (m, n)) for _ in range(M)]
    model = GenerativeModel(A=A, A_dependencies=[[0]] * M, D=[np.full(n, 1.0 / n)])
    est = estimated_bytes("hybrid_block", model)
    assert est > 2 * 2**30  # the merged array alone holds 4e8 elements
    with pytest.raises(MemoryBudgetExceeded, match=r"hybrid_block: its arrays are estimated at 3\.0 GiB while built, "
                                                   r"over memory_budget_mb 2048 \(2\.0 GiB\)"):
        node_budget(2048).check("hybrid_block", model)
    assert node_budget(2048).check("baseline", model) < 64 * 2**20
