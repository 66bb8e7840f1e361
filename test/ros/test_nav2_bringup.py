"""Bringup as Nav2's lifecycle manager does it, and reconfigure loading another model, over a real ROS graph.

nav2_lifecycle_manager is not installable here, so the test makes the manager's own service calls in its order
(``startup``: wait for ``<node>/get_state``, then per node ``change_state`` CONFIGURE and ``get_state`` == inactive,
then ACTIVATE and ``get_state`` == active, then the bond (test_bond.py forms it with bondpy's peer side); ``reset``:
DEACTIVATE, CLEANUP; ``shutdown``: DEACTIVATE, CLEANUP, UNCONFIGURED_SHUTDOWN). Between a reset and the next
startup the test sets ``model_file`` to another model, as a Nav2 user would before re-configuring, and then to a
file the loader refuses: configure fails with the reason, the node stays up and unconfigured.
"""
from __future__ import annotations

import time

import numpy as np
import pytest
import yaml

import ros_harness
from ros_harness import REPO_ROOT, AgentProcess, default_params, wait_for

pytestmark = pytest.mark.ros

NS = "/nav2"
NAME = "agent"
FQN = f"{NS}/{NAME}"


def second_model(path):
    """The default model with the location factor cut to 3 states (and its rfid_tag levels to 4): another
    structure, saved with bayes_infer_ros.model.save_model."""
    from bayes_infer_ros.model import load_model
    from bayes_infer_ros.model.generative_model import GenerativeModel
    from bayes_infer_ros.model.io import save_model

    m = load_model(REPO_ROOT / "config" / "agent.yaml")
    rfid = np.full((4, 3), 0.05)
    np.fill_diagonal(rfid, 0.85)
    rfid[3] = 0.1
    rfid /= rfid.sum(axis=0, keepdims=True)
    B_loc = np.stack([np.roll(np.eye(3), k, axis=0) for k in (0, 1, -1)], axis=-1)  # stay / next / previous
    keep = [0, 1, 3]  # dock, aisle_a, charger
    A = [rfid, m.A[1], m.A[2][:, keep, :], m.A[3][:, keep, :]]
    B = [B_loc, m.B[1][:, :, keep, :] if m.B[1].ndim == 4 else m.B[1], m.B[2]]
    D = [np.full(3, 1 / 3), m.D[1], m.D[2]]
    model = GenerativeModel(A=A, A_dependencies=m.A_dependencies, B=B, B_dependencies=m.B_dependencies, D=D,
                            factor_names=list(m.factor_names), modality_names=list(m.modality_names),
                            state_labels=[["dock", "aisle_a", "charger"]] + [list(x) for x in m.state_labels[1:]],
                            observation_labels=[["dock", "aisle_a", "charger", "none"]]
                            + [list(x) for x in m.observation_labels[1:]],
                            control_labels=[list(x) for x in m.control_labels])
    save_model(model, path)
    return path


@pytest.fixture(scope="module")
def agent(ros_graph, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("nav2")
    params = default_params()
    params.update({"jax_compilation_cache_dir": ros_graph["jax_cache"], "variant": "baseline", "rate_hz": 0.0,
                   "autostart": False, "diagnostics_period": 0.2, "observation_timeout": 30.0})
    proc = AgentProcess(tmp, NAME, params, namespace=NS)
    proc.tmp = tmp
    yield proc
    proc.stop()


def change_state(probe, transition: str) -> bool:
    return ros_harness.change_state(probe, FQN, transition)


def get_state(probe) -> str:
    from lifecycle_msgs.srv import GetState

    return probe.call(GetState, f"{FQN}/get_state", GetState.Request(), idempotent=True).current_state.label


def manager_transition(probe, transition: str, expected: str) -> bool:
    """nav2_lifecycle_manager's changeStateForNode: change_state, then get_state must read the goal state."""
    return change_state(probe, transition) and get_state(probe) == expected


def startup(probe) -> bool:
    return (manager_transition(probe, "configure", "inactive")
            and manager_transition(probe, "activate", "active"))  # the bond: test_bond.py


def manager_reset(probe) -> bool:
    return manager_transition(probe, "deactivate", "inactive") and manager_transition(probe, "cleanup", "unconfigured")


def set_params(probe, **values):
    from rcl_interfaces.srv import SetParameters
    from rclpy.parameter import Parameter

    req = SetParameters.Request(parameters=[Parameter(k, value=v).to_parameter_msg() for k, v in values.items()])
    return probe.call(SetParameters, f"{FQN}/set_parameters", req).results


def one_belief(probe, beliefs, levels: dict):
    """Publish one observation per modality until a Beliefs message answers; returns it."""
    from bayes_infer_ros.msg import CategoricalObservation

    pubs = {m: probe.publisher(f"{NS}/observations/{m}", CategoricalObservation) for m in levels}
    assert wait_for(lambda: all(p.get_subscription_count() >= 1 for p in pubs.values()), 20)
    n = len(beliefs)
    end = time.monotonic() + 20
    while len(beliefs) == n and time.monotonic() < end:
        for m, level in levels.items():
            msg = CategoricalObservation()
            msg.level = level
            pubs[m].publish(msg)
        wait_for(lambda: len(beliefs) > n, 0.5)
    assert len(beliefs) > n
    return beliefs[-1][1]


def test_nav2_manager_bringup_and_reconfigure_with_another_model(probe, agent):
    from diagnostic_msgs.msg import DiagnosticArray

    from bayes_infer_ros.msg import Beliefs

    beliefs = probe.record(f"{NS}/beliefs", Beliefs)
    diags = probe.record("/diagnostics", DiagnosticArray)
    levels = {"rfid_tag": 2, "voltage": 1, "lidar_gap": 0, "charging": 1}
    # autostart false: the node waits, unconfigured, for the manager
    assert agent.wait_log("ros2 lifecycle set", 60), agent.log_text()
    assert get_state(probe) == "unconfigured"
    assert startup(probe), agent.log_text()
    first = one_belief(probe, beliefs, levels)
    assert len(first.factors[0].probabilities) == 4 and first.factors[0].most_likely_label == "aisle_b"

    # a model_file that does not exist is refused when set; the model in use is kept
    (res,) = set_params(probe, model_file=str(agent.tmp / "missing.npz"))
    assert not res.successful and "does not exist" in res.reason
    # set while active: accepted, read at the next configure (the running model is unchanged)
    other = second_model(agent.tmp / "second.npz")
    (res,) = set_params(probe, model_file=str(other))
    assert res.successful, res.reason
    assert agent.wait_log("read at the next configure", 10), agent.log_text()
    assert len(one_belief(probe, beliefs, levels).factors[0].probabilities) == 4

    # the manager's reset, then startup: configure loads the new model
    assert manager_reset(probe), agent.log_text()
    assert startup(probe), agent.log_text()
    second = one_belief(probe, beliefs, levels)
    assert [f.state_labels for f in second.factors][0] == ["dock", "aisle_a", "charger"]
    assert second.factors[0].most_likely_label == "charger"  # rfid_tag level 2 is "charger" in this model

    # a file that exists but is no model: configure fails with the reason, the node stays up, unconfigured
    broken = agent.tmp / "broken.yaml"
    broken.write_text("/**:\n  ros__parameters:\n    model: [unclosed\n")
    assert manager_reset(probe)
    (res,) = set_params(probe, model_file=str(broken))
    assert res.successful, res.reason
    assert not change_state(probe, "configure")
    assert get_state(probe) == "unconfigured" and agent.proc.poll() is None
    assert "not valid YAML" in agent.log_text()

    def error_status():
        for _, arr in reversed(diags):
            for st in arr.status:
                if st.name == f"{FQN}: inference":
                    return st
        return None

    assert wait_for(lambda: error_status() is not None and "not valid YAML" in error_status().message, 10)
    # fixed: the next configure works again (the inline model, model_file empty)
    (res,) = set_params(probe, model_file="")
    assert res.successful, res.reason
    assert startup(probe), agent.log_text()
    assert len(one_belief(probe, beliefs, levels).factors[0].probabilities) == 4

    # the manager's shutdown: deactivate, cleanup, shutdown -> finalized
    assert manager_reset(probe)
    assert manager_transition(probe, "unconfigured_shutdown", "finalized")


def test_shipped_bringup_files_match_the_manager():
    """config/nav2_lifecycle.yaml: a manager that brings the agent up with bonds on (Nav2's defaults); the launch
    file starts it with the namespace and autostart false for the node (checked in test_node_modes with stub launch
    modules)."""
    doc = yaml.safe_load((REPO_ROOT / "config" / "nav2_lifecycle.yaml").read_text())
    ((node_key, body),) = doc.items()
    params = body["ros__parameters"]
    assert node_key == "/**"  # under any namespace (test_nav2_namespace.py reads it as the manager would)
    assert params["node_names"] == ["agent"] and params["autostart"] is True
    assert params["bond_timeout"] == 4.0  # Nav2's default: the node forms the bond (bondpy, test_bond.py)
    agent_doc = yaml.safe_load((REPO_ROOT / "config" / "agent.yaml").read_text())
    assert agent_doc["/**"]["ros__parameters"]["autostart"] is False  # the manager drives the transitions
