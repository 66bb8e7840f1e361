"""What the agent node tells its users: ``--help``, how to configure it, why it could not start, which
``qos_overrides`` it ignores, and which topics in the graph look meant for it.

Pure text from the parameter table (no rclpy), so the help cannot drift from what the node declares; the graph
checks take any object with rclpy's graph queries.
"""
from __future__ import annotations

import textwrap
from typing import Any, Iterable, Mapping, Sequence

from bayes_infer_ros.adapters import PARAMETER_HELP
from bayes_infer_ros.adapters.controls import PARAMETER_HELP as CONTROL_HELP
from bayes_infer_ros.adapters.events import PARAMETER_HELP as EVENT_HELP

# The per-modality surprise parameters (node/parameters.py SURPRISE_PREFIXES), as --help explains them.
SURPRISE_HELP = (
    ("surprise_gate.", "a reading whose surprise under the tick's prior predictive is above it is refused as an "
                       "outlier before it enters the tick (counted rejected.outlier, logged throttled)"),
    ("surprise_threshold.", "/diagnostics warns, naming the modality and its topic, while the mean surprise of its "
                            "last surprise_warn_ticks readings is above it (default: its gate)"),
)
QOS_PREFIX = "qos_overrides."
# The policies the node lets qos_overrides replace (agent_node's QoSOverridingOptions), and the depths rclpy takes.
QOS_POLICIES = ("depth", "durability", "history", "reliability")
MAX_QOS_DEPTH = 2**31 - 1

INTERFACES = """\
topics (relative to the namespace):
  sub  observations/<modality>  bayes_infer_ros/msg/CategoricalObservation  best effort (SensorDataQoS)
                                (level, or label: the level by name); an adapted modality reads its sensor's topic
  sub  controls                 bayes_infer_ros/msg/Controls (stamped: one control index per factor, optional labels);
                                a factor with a control adapter (controls.<factor>) reads its command's topic instead
  pub  beliefs                  bayes_infer_ros/msg/Beliefs      reliable, transient local, depth 1 (latest kept);
                                free energy, each modality's surprise and outliers (evidence: true)
  pub  beliefs/<factor>         bayes_infer_ros/msg/Belief       same; most likely state, its label, entropy
  pub  ~/policy                 bayes_infer_ros/msg/Policy       same, with policy inference on (policy.inference):
                                the policies, neg_efe (G), q_pi, the chosen control of each factor and its label
  pub  ~/events                 bayes_infer_ros/msg/BeliefEvent  each belief event (events.<name>) that fired
  pub  ~/events/<name>          std_msgs/msg/Bool                the event's value: reliable, transient local, depth 1
  pub  /diagnostics             diagnostic_msgs/msg/DiagnosticArray  the node's status, one per modality and control
services (private, under the node's name; remap with -r ~/reset:=NAME):
  ~/reset           std_srvs/srv/Trigger               beliefs back to D, VMP/MMP window cleared, events False,
                                                       the stream of policy.seed restarted
  ~/switch_variant  bayes_infer_ros/srv/SwitchVariant  answers when the new engine is active
  ~/set_beliefs     bayes_infer_ros/srv/SetBeliefs     the next tick's prior: a level or a distribution per factor
several agents (agents: [a, b]): each agent's topics under <agent>/ (a/observations/<modality>, a/controls,
a/beliefs, a/beliefs/<factor>, ~/a/policy), ~/a/events[/<name>] and a/reset (std_srvs/srv/Trigger, that agent
only); ~/reset resets every agent; ~/set_beliefs names the agent.
QoS: qos_overrides.<resolved topic>.publisher|subscription.<depth|durability|history|reliability> in a params
file replaces the defaults above (e.g. qos_overrides./beliefs.publisher.durability: volatile)."""


def usage(parameters: Sequence[Any], prog: str = "agent_node") -> str:
    """The ``--help`` text: how to start the node, its interfaces, and every parameter with its default."""
    lines = [
        f"usage: {prog} [--plain] [--help] --ros-args [--params-file FILE] [-p NAME:=VALUE ...] [-r FROM:=TO ...]",
        "",
        "Discrete Bayesian state inference (FPI / VMP / MMP) as a ROS 2 node. Lifecycle node by default:",
        "configure (load + validate the model, compile) -> activate (tick). --plain: a plain node that configures",
        "and activates at once and exits with status 1 when the model is refused.",
        "",
        "examples:",
        f"  {prog} --ros-args --params-file config/agent.yaml -p autostart:=true",
        f"  {prog} --plain --ros-args -p model_file:=my_model.yaml -r __ns:=/robot1",
        f"  {prog} --ros-args --params-file config/agent.yaml -p autostart:=true -p 'agents:=[robot1, robot2]'",
        "",
        INTERFACES,
        "",
        "parameters (default; config/agent.yaml holds the same values):",
    ]
    width = max(len(p.name) for p in parameters)
    for p in parameters:
        default = repr(p.default)
        flags = " (read-only)" if p.read_only else ""
        head = f"  {p.name.ljust(width)}  {default}{flags}"
        lines.append(head)
        lines += textwrap.wrap(p.description, 100, initial_indent=" " * (width + 4), subsequent_indent=" " * (width + 4))
    lines += ["", "model.*: the inline model (see config/agent.yaml); `bayes-infer model validate FILE` checks a model file.",
              "", "adapters.<modality>.*: a sensor adapter, checked at configure before the engine build (README",
              "'Sensor adapters'; the default model's: config/agent_adapters.yaml; every supported type:",
              "config/robot_adapters.yaml):"]
    groups = [
        ([], "adapters.<modality>.{}", PARAMETER_HELP),
        (["", "controls.<factor>.*: a control adapter, the factor's control from the robot's own message, checked",
          "at configure before the engine build (docs/node.md 'Control adapters'; config/robot_adapters.yaml):"],
         "controls.<factor>.{}", CONTROL_HELP),
        (["", "events.<name>.*: a belief event on ~/events and ~/events/<name>, checked at configure (docs/node.md",
          "'Belief events'):"], "events.<name>.{}", EVENT_HELP),
        (["", "surprise_gate.<modality>, surprise_threshold.<modality> (nats, read at configure; none by default;",
          "the default model's: config/agent_surprise.yaml):"], "{}<modality>", SURPRISE_HELP),
    ]
    for intro, name, rows in groups:  # name: each row's parameter name, its key in place of {}
        lines += intro
        for key, text in rows:
            lines.append("  " + name.format(key))
            lines += textwrap.wrap(text, 100, initial_indent=" " * 6, subsequent_indent=" " * 6)
    return "\n".join(lines)


def unconfigured_hint(fqn: str) -> str:
    """What a lifecycle node that is waiting to be configured logs at start."""
    return (f"unconfigured: waiting for `ros2 lifecycle set {fqn} configure`, then `ros2 lifecycle set {fqn} "
            f"activate` (or call {fqn}/change_state); start with `-p autostart:=true` (what the launch file passes) "
            "to configure and activate at once")


class ConfigureRefused(RuntimeError):
    """A plain-mode node that could not configure; ``logger_name``: the node's own logger (its FATAL line's)."""

    def __init__(self, reason: str, logger_name: str):
        super().__init__(reason)
        self.logger_name = logger_name


def creation_failure(exc: BaseException) -> str:
    """The FATAL line when the node could not be created or (plain mode) configured."""
    if isinstance(exc, ConfigureRefused):
        return str(exc)
    text = f"the node could not be created: {type(exc).__name__}: {str(exc).strip()}"
    if "Name" in type(exc).__name__ or "Namespace" in type(exc).__name__:
        return (f"{text}; every topic and service name the node makes (its namespace, its name, then e.g. "
                "/describe_parameters) must be a valid ROS name of at most 247 characters: use a shorter namespace "
                "or node name (-r __ns:=/NAMESPACE, -r __node:=NAME)")
    return text


def start_failure(exc: BaseException) -> str:
    """The FATAL line when ``rclpy.init`` fails: ROS logging that cannot start (an unwritable log folder) or,
    otherwise, the arguments (most often a params file rcl cannot parse)."""
    text = str(exc)
    if "logging" in text.lower():
        return (f"ROS logging could not start: {text}; point ROS_LOG_DIR (or ROS_HOME) at a writable folder, e.g. "
                "ROS_LOG_DIR=/tmp/ros_log, or turn file logging off with --ros-args --disable-external-lib-logs")
    return (f"ROS could not start with these arguments (is every params file valid? lists must not mix integers "
            f"and floats: write 1.0, not 1): {text}")


# What a node says after lifecycle shutdown (its diagnostics and services): it will not be configured again.
FINALIZED = "finalized: the node was shut down (lifecycle shutdown) and cannot be configured again; start a new one"


def not_configured(fqn: str, config_error: str = "") -> str:
    """A service's answer while the node ``fqn`` has no model (``config_error``: why its last configure failed)."""
    reason = config_error or "not configured yet"
    if reason == FINALIZED:
        return reason
    return (f"{reason}; configure the node first: `ros2 lifecycle set {fqn} configure` (it loads the model), "
            "or start it with `-p autostart:=true`")


def _split(key: str) -> tuple[str, str]:
    """``qos_overrides./ns/topic.publisher.depth`` -> (``/ns/topic``, ``publisher``); ('', '') if malformed."""
    rest = key[len(QOS_PREFIX):]
    for kind in ("publisher", "subscription"):
        mark = f".{kind}"
        at = rest.rfind(mark)
        if at > 0:
            return rest[:at], kind
    return "", ""


def _policy(key: str) -> str:
    """``qos_overrides./ns/topic.publisher.depth`` -> ``depth`` ("" if malformed)."""
    topic, kind = _split(key)
    return key[len(QOS_PREFIX) + len(topic) + len(kind) + 2:] if topic else ""


def unused_qos_overrides(overrides: Mapping[str, Any], published: Iterable[str], subscribed: Iterable[str]) -> list[str]:
    """Warnings for ``qos_overrides.*`` keys that name no publisher / subscription of this node (resolved names),
    or a policy it does not let them override (a misspelt one)."""
    published, subscribed = set(published), set(subscribed)
    out = []
    for key in sorted(k for k in overrides if k.startswith(QOS_PREFIX)):
        topic, kind = _split(key)
        have = published if kind == "publisher" else subscribed
        if topic and topic in have:
            if _policy(key) not in QOS_POLICIES:
                out.append(f"parameter '{key}' ignored: '{_policy(key)}' is not a QoS policy this node lets you "
                           f"override (one of: {', '.join(QOS_POLICIES)})")
            continue
        known = sorted(f"{t} ({'publisher' if t in published else 'subscription'})" for t in published | subscribed)
        out.append(f"parameter '{key}' ignored: this node has no {kind or 'publisher or subscription'} "
                   f"{topic or '(malformed key)'}; QoS overrides apply to: {', '.join(known)}")
    return out


def qos_override_error(overrides: Mapping[str, Any]) -> str:
    """The first ``qos_overrides.*.depth`` rclpy cannot take ("" when all can), naming the key and the range."""
    for key in sorted(k for k in overrides if k.startswith(QOS_PREFIX) and _policy(k) == "depth"):
        value = overrides[key]
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_QOS_DEPTH:
            return f"parameter '{key}' = {value!r}: expected an integer depth in 1..{MAX_QOS_DEPTH}"
    return ""


def entity_error(exc: BaseException, overrides: Mapping[str, Any]) -> str:
    """Why creating the topics and services failed: a ``qos_overrides`` value rclpy cannot take when there is
    one (rclpy's own message names no parameter), else ``exc``."""
    return qos_override_error(overrides) or str(exc)


def unknown_topics(topic_names: Iterable[str], obs_prefix: str, modalities: Sequence[str], legacy_actions_topic: str,
                   legacy_published: bool, controls_topic: str, warned: set) -> list[tuple[str, str]]:
    """(warning, counter or "") for each topic of the graph's ``topic_names`` not warned about yet (added to
    ``warned``) that a user may have meant for this node: ``observations/<name>`` of no modality, or the old
    ``actions`` topic while it has a publisher (``legacy_published``; the node's controls are ``controls_topic``)."""
    known = {obs_prefix + m for m in modalities}
    out = []
    for name in topic_names:
        if name in warned:
            continue
        if name == legacy_actions_topic and legacy_published:
            warned.add(name)
            out.append((f"{name} has a publisher, but this node no longer reads it: publish "
                        f"bayes_infer_ros/msg/Controls (stamped) on {controls_topic}", ""))
        if name.startswith(obs_prefix) and name not in known:
            warned.add(name)
            out.append((f"{name}: published but the model has no such modality (modalities: {list(modalities)}); "
                        "ignored", "unknown_modality_topics"))
    return out


def refuse_name_clashes(names: Sequence[tuple[str, str]], kind: str) -> None:
    """Raise ValueError when two of the node's ``kind`` (services, topics) resolve to one name: ``names`` are
    (resolved name, what it is) pairs, e.g. an agent named like its node (``agents: [agent]`` in the node ``agent``)
    whose ``agent/reset`` is the node's own ``~/reset``."""
    seen: dict[str, str] = {}
    for resolved, what in names:
        if resolved in seen:
            raise ValueError(f"agents: {seen[resolved]} and {what} would both be the {kind} {resolved}; give the agent "
                             "another name (or the node: --ros-args -r __node:=NAME)")
        seen[resolved] = what


def same_name_count(names_and_namespaces: Iterable[tuple[str, str]], name: str, namespace: str) -> int:
    """How many graph entries ``(name, namespace)`` (``get_node_names_and_namespaces``) are this node's
    fully qualified name (this node included)."""
    namespace = namespace.rstrip("/") or "/"
    return sum(1 for n, ns in names_and_namespaces if n == name and (ns.rstrip("/") or "/") == namespace)


def duplicate_name(names_and_namespaces: Iterable[tuple[str, str]], name: str, namespace: str, fqn: str) -> str:
    """The warning when another node in the graph (``get_node_names_and_namespaces``) has this node's fully qualified
    name ``fqn`` ("" otherwise)."""
    count = same_name_count(names_and_namespaces, name, namespace)
    if count < 2:
        return ""
    return (f"{count} nodes named {fqn} run in this ROS graph: their beliefs interleave on one topic, their "
            f"diagnostics merge and a service call reaches only one of them; give each its own name or namespace "
            f"(--ros-args -r __node:=NAME or -r __ns:=/NAMESPACE)")
