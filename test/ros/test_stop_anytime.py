"""A stop at any moment of start-up is clean and bounded (issue 45, item 1): SIGINT at 40 delays spread over the
start-up of a lifecycle node and of a plain node (``variant: auto``, autostart, a decision cache, a JAX cache and ROS
logs of the test's own), four nodes at once, each with its own delay (``lab/stop_probe.py``). The delays run from
the imports through ``rclpy.init``, the node's constructor, configure's build and activate to the verify step's
child; the last ones land after the node is active even on a loaded machine.

Every node exits with status 0, within the bound of its signal, and its log holds no traceback, no "Exception
ignored" and no crash report; none hangs. Before ``cli/stop_signal.py`` the same sweep ended 36% of the nodes with a
KeyboardInterrupt traceback, hung 7% (the interrupt swallowed by JAX's garbage-collector callback before rclpy's
handler was installed), and crashed 3% inside jaxlib's module set-up (-6, -11).
"""
from __future__ import annotations

import pytest

from lab import stop_probe

pytestmark = [pytest.mark.ros, pytest.mark.heavy]

# From 0.3 s: before the interpreter has run agent_node's first line (tens of milliseconds, a tenth of a second on a
# loaded machine) a signal ends it as Python's own start-up does (docs/node.md, "Stopping").
DELAYS = stop_probe.spread(32, 0.3, 3.0) + stop_probe.spread(8, 3.5, 8.0)
#: The product's bound (docs/node.md, "Stopping"), plus a second for a loaded machine to end the process and for
#: this one to see it (the node's watcher ends it at the bound itself).
EXIT_LIMIT_S = stop_probe.BOUND_S + 1.0


@pytest.mark.parametrize("plain", [False, True], ids=["lifecycle", "plain"])
def test_sigint_at_any_moment_of_start_up_is_a_clean_bounded_stop(ros_graph, tmp_path, plain):
    params = stop_probe.stop_params(tmp_path)
    trials = stop_probe.run_trials(params, DELAYS, tmp_path, plain=plain, parallel=4,
                                   env=stop_probe.private_env(tmp_path))
    report = stop_probe.summary(trials, 0, EXIT_LIMIT_S)
    unclean = [t for t in trials if t.problem(0, EXIT_LIMIT_S) is not None]
    assert not unclean, f"{report}\n\nthe first unclean node's log:\n{unclean[0].log[-4000:]}"
    phases = {t.phase for t in trials}
    assert {"none", "active"} <= phases, f"the sweep missed part of the start-up:\n{report}"
