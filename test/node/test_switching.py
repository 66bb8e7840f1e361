"""node/switching.py without an engine: ``~/switch_variant``'s answers when there is nothing to build or the build
is cancelled by cleanup (its parameters put back); node/parameters.py: parameter requests checked together."""
from __future__ import annotations

from types import SimpleNamespace

from bayes_infer_ros.inference import VARIANTS
from bayes_infer_ros.node.deployer import BuildCancelled
from bayes_infer_ros.node.parameters import change_refused
from bayes_infer_ros.node.runtime import AgentRuntime
from bayes_infer_ros.node.settings import NodeSettings
from bayes_infer_ros.node.switching import switch
from recording_log import RecordingLog


def _runtime(**settings) -> AgentRuntime:
    return AgentRuntime(NodeSettings(**settings), RecordingLog(), lambda: 0, lambda: False, lambda *a: None)


class _Ticket:
    def wait(self, timeout=None, abort=lambda: False):
        raise BuildCancelled("the node was cleaned up (lifecycle cleanup) before the new engine was ready")


def _configured(runtime: AgentRuntime) -> None:
    """A runtime with a tick loop and a deployer whose requests are cancelled by cleanup."""
    worker = SimpleNamespace(counts={"requested": 0}, wait_request_after=lambda before, timeout: _Ticket())
    runtime.deployer = SimpleNamespace(worker=worker, busy=False)
    runtime.loop = object()


def test_switch_variant_answers_without_waiting_when_there_is_nothing_to_build():
    runtime = _runtime(algorithm="fpi", variant="baseline")
    calls = []

    def set_parameters(values):
        calls.append(values)
        return False, "refused: no such variant"

    out = switch(runtime, {"algorithm": "", "variant": "x"}, set_parameters, lambda: "not configured")
    assert (out.success, out.message, out.algorithm, out.variant) == (False, "not configured", "fpi", "baseline")
    _configured(runtime)
    out = switch(runtime, {"algorithm": "", "variant": ""}, set_parameters, lambda: "not configured")
    assert (out.success, out.message) == (True, "nothing to change") and calls == []
    out = switch(runtime, {"algorithm": "", "variant": "x"}, set_parameters, lambda: "not configured")
    assert (out.success, out.message, out.variant) == (False, "refused: no such variant", "baseline")
    assert calls == [{"variant": "x"}]  # empty fields are not set


def test_a_switch_cancelled_by_cleanup_puts_its_parameters_back():
    """A switch whose build cleanup cancels answers failure and sets its parameters back, so the next configure
    does not apply them."""
    runtime = _runtime(algorithm="fpi", variant="baseline")
    _configured(runtime)
    calls = []

    def set_parameters(values):
        calls.append(values)
        return True, ""

    out = switch(runtime, {"algorithm": "", "variant": "fused_dense"}, set_parameters, lambda: "")
    assert not out.success and out.message.startswith("build cancelled: the node was cleaned up")
    assert out.message.endswith("; parameters put back to {'variant': 'baseline'}")
    assert calls == [{"variant": "fused_dense"}, {"variant": "baseline"}]


def test_parameter_requests_are_checked_together_and_the_first_reason_is_given():
    def refused(changes):
        return change_refused(changes, variants=VARIANTS, memory_budget_mb=1024.0)

    assert refused([("rate_hz", 50.0), ("num_iter", 16)]) is None
    assert refused([("rate_hz", 50.0), ("variant", "no_such")]).startswith("variant: 'no_such'")
    assert refused([("rate_hz", 1e-10), ("variant", "no_such")]).startswith("rate_hz: expected 0")
