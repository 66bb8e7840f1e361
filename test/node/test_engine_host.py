"""node/engine_host.py without an engine: ``~/switch_variant``'s answers when there is nothing to build or the
build is cancelled by cleanup (its parameters put back), and parameter requests checked together."""
from __future__ import annotations

from types import SimpleNamespace

from bayes_infer_ros.node.builder import BuildCancelled
from bayes_infer_ros.node.engine_host import EngineHost
from recording_log import RecordingLog


def _host(params: dict) -> EngineHost:
    return EngineHost(params.__getitem__, dict, RecordingLog(), lambda *a: None, lambda: False)


def test_switch_variant_answers_without_waiting_when_there_is_nothing_to_build():
    host = _host({"algorithm": "fpi", "variant": "baseline"})
    calls = []

    def set_parameters(values):
        calls.append(values)
        return False, "refused: no such variant"

    out = host.switch({"algorithm": "", "variant": "x"}, set_parameters, lambda: True, lambda: "not configured")
    assert (out.success, out.message, out.algorithm, out.variant) == (False, "not configured", "fpi", "baseline")
    host.builder = SimpleNamespace(counts={"requested": 0})  # configured: a builder is running
    out = host.switch({"algorithm": "", "variant": ""}, set_parameters, lambda: False, lambda: "not configured")
    assert (out.success, out.message) == (True, "nothing to change") and calls == []
    out = host.switch({"algorithm": "", "variant": "x"}, set_parameters, lambda: False, lambda: "not configured")
    assert (out.success, out.message, out.variant) == (False, "refused: no such variant", "baseline")
    assert calls == [{"variant": "x"}]  # empty fields are not set


def test_a_switch_cancelled_by_cleanup_puts_its_parameters_back():
    """A switch whose build cleanup cancels answers failure and sets its parameters back, so the next configure
    does not apply them."""
    host = _host({"algorithm": "fpi", "variant": "baseline"})
    host.builder = SimpleNamespace(counts={"requested": 0})
    calls = []

    def set_parameters(values):
        calls.append(values)
        return True, ""

    def cancelled(before, cleaned_up):
        raise BuildCancelled("the node was cleaned up (lifecycle cleanup) before the new engine was ready")

    host.wait_for_build = cancelled
    out = host.switch({"algorithm": "", "variant": "fused_dense"}, set_parameters, lambda: False, lambda: "")
    assert not out.success and out.message.startswith("build cancelled: the node was cleaned up")
    assert out.message.endswith("; parameters put back to {'variant': 'baseline'}")
    assert calls == [{"variant": "fused_dense"}, {"variant": "baseline"}]


def test_parameter_requests_are_checked_together_and_the_first_reason_is_given():
    host = _host({"memory_budget_mb": 1024.0})
    assert host.change_refused([("rate_hz", 50.0), ("num_iter", 16)]) is None
    assert host.change_refused([("rate_hz", 50.0), ("variant", "no_such")]).startswith("variant: 'no_such'")
    assert host.change_refused([("rate_hz", 1e-10), ("variant", "no_such")]).startswith("rate_hz: expected 0")
