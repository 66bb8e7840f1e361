"""The node's parameters: one table (name, default, description, range/choices, read-only, what a change
does) and pure validation. No rclpy here; ``agent_node`` turns each row into a ParameterDescriptor.

Runtime-tunable parameters are validated by :func:`validate_change` (the on-set callback returns its
reason), then applied (post-set): ``algorithm``, ``variant``, ``num_iter``, ``tau`` and ``horizon`` compile a
new engine off the tick path; ``rate_hz`` re-creates the timer; the rest take effect at the next tick.
"""
from __future__ import annotations

import difflib
import math
import os
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence

from ..autotune.select import MemoryBudget
from ..inference.algorithm_specs import ALGORITHMS, algorithm_spec
from ..inference.policy import MAX_SEED, POLICY_PARAMETERS, SAMPLING_MODES, SELECTIONS, TERMS, check_terms

DEVICES = ("auto", "cpu", "gpu")
POLICY_INFERENCE = ("auto", "enabled", "disabled")
# Changing one of these builds and compiles a new engine in a worker thread; the tick swaps it in.
ENGINE_PARAMETERS = ("algorithm", "variant", "num_iter", "tau", "horizon", "autotune_verify_top_k")
# The slowest timer: 1000 s between ticks (rclpy timers hold the period as int64 nanoseconds; a rate near 0
# would overflow it). 0 is event-driven.
MIN_RATE_HZ = 1e-3


@dataclass(frozen=True)
class ParamSpec:
    name: str
    default: Any
    description: str
    read_only: bool = False
    choices: Optional[tuple[str, ...]] = None   # allowed string values (descriptor additional_constraints)
    int_range: Optional[tuple[int, int]] = None
    float_range: Optional[tuple[float, float]] = None


PARAMETERS: tuple[ParamSpec, ...] = (
    ParamSpec("model_file", "", "Model file (.npz or params .yaml with a model: block). Empty: the inline model.* parameters. "
              "Read at configure: cleanup, set it (or model.*), configure loads the new model; a change while configured "
              "takes effect at the next configure. A file that does not exist is refused when set."),
    ParamSpec("agents", [], "Names of the agents this node serves, one model for all (string array, e.g. [robot1, "
              "robot2]). Each gets <agent>/observations/<modality>, <agent>/controls, <agent>/beliefs[/<factor>] and "
              "<agent>/reset under the node's namespace, its own beliefs and window; one tick steps them all in one "
              "batched engine call. At most 256 (each agent's topics and services are ROS entities: a node's configure "
              "and shutdown grow faster than linearly in them; serve more agents from several nodes). Empty (the "
              "default; leave it out of a params file, rcl cannot read []): one agent at the node's namespace. Read at "
              "configure."),
    ParamSpec("algorithm", "fpi", "Inference algorithm: fpi (one step, empirical prior carried as pymdp's Agent does), "
              "vmp or mmp (over a window of `horizon` steps; need B).", choices=ALGORITHMS),
    ParamSpec("variant", "auto", "Engine variant: auto (the autotuner's choice; 'baseline' if it is unavailable), "
              "baseline, or a merged variant. A change compiles off the tick path and swaps in atomically."),
    ParamSpec("autotune_verify_top_k", 3, "variant auto: build the autotuner's k best candidates of each device and "
              "baseline, time them here round-robin (off the tick path, a compile each) and run the fastest, never one "
              "measured slower than baseline; the verified choice is kept (BAYES_INFER_DECISION_CACHE) until the "
              "model, settings, devices or versions change. 0: the first device's first candidate, in milliseconds "
              "(docs/autotune.md).",
              int_range=(0, 10)),
    ParamSpec("num_iter", 16, "Variational iterations per tick.", int_range=(1, 1024)),
    ParamSpec("tau", 1.0, "VMP/MMP mirror-descent step size.", float_range=(1e-6, 100.0)),
    ParamSpec("horizon", 5, "VMP/MMP window in steps (one compiled size; the window is right-aligned).", int_range=(1, 1024)),
    ParamSpec("rate_hz", 10.0, "Tick rate on the node clock (sim time when use_sim_time). 0: event-driven, a tick as soon "
              f"as every non-silent modality has a new observation. Otherwise at least {MIN_RATE_HZ:g} Hz.",
              float_range=(0.0, 10000.0)),
    ParamSpec("observation_timeout", 1.0, "Seconds. An observation whose stamp is older than this on arrival is dropped "
              "(counted 'stale'); a modality with no message for this long is 'silent' (diagnostics WARN) and no longer "
              "holds up event-driven ticks. 0 disables both.", float_range=(0.0, 3600.0)),
    ParamSpec("silence_clock", "node", "The clock the silence timeout and input rates run on: node (the node's clock: "
              "with use_sim_time the simulation's, so a paused or slowed replay makes no sensor silent; its first "
              "/clock restarts every timeout) or wall (the host's monotonic clock, whatever the node's).",
              choices=("node", "wall")),
    ParamSpec("max_future_stamp", 0.5, "Seconds. An observation stamped more than this ahead of the node clock is "
              "dropped (counted 'future'), so one wrong clock cannot shut out the valid messages after it.",
              float_range=(0.0, 3600.0)),
    ParamSpec("memory_budget_mb", 2048.0, "MiB. Every engine build (a user's variant as well as auto's choice) is refused "
              "when the structure-only estimate of its prepared arrays exceeds this; the refusal gives the estimate.",
              float_range=(0.001, 1048576.0)),
    ParamSpec("tick_without_observations", False, "Timer mode: also tick when no modality has a new observation "
              "(a pure prediction step). Default false: a tick without new input is skipped and counted 'idle'."),
    ParamSpec("evidence", True, "Compute each tick's free energy and each reading's surprise under the tick's prior "
              "predictive (Beliefs.free_energy and .surprise, each modality's surprise statistics in /diagnostics) and "
              "apply the surprise gates (surprise_gate.<modality>). False: Beliefs carry NaN and no surprise. Read at "
              "configure."),
    ParamSpec("surprise_window", 100, "Readings per modality that its surprise statistics in /diagnostics cover (mean, "
              "p95, the largest recent mean). Read at configure.", int_range=(1, 100000)),
    ParamSpec("surprise_warn_ticks", 10, "/diagnostics warns, naming the modality and its topic, while the mean "
              "surprise of a modality's last this-many readings is above its surprise_threshold.<modality> (or, "
              "without one, its surprise_gate.<modality>). Read at configure.", int_range=(1, 10000)),
    ParamSpec("observation_qos_depth", 5, "Queue depth of the observations/<modality> subscriptions (SensorDataQoS: "
              "best effort, volatile).", read_only=True, int_range=(1, 10000)),
    ParamSpec("beliefs_qos_depth", 1, "Queue depth of beliefs and beliefs/<factor> (reliable, transient local: a "
              "subscriber that joins late gets the latest one). qos_overrides.<topic>.publisher.* override it.",
              read_only=True, int_range=(1, 10000)),
    ParamSpec("device", "auto", "Where the tick runs: auto (the measured fastest of the host CPU and, when present and "
              "it passes a self-test, the GPU), cpu, or gpu (configure fails, with the reason, when no working GPU is "
              "here). Read at configure. GPU memory is not preallocated (XLA_PYTHON_CLIENT_PREALLOCATE=false unless "
              "set).", read_only=True, choices=DEVICES),
    ParamSpec("cpu_affinity", "", "CPUs for the node's executor thread, its build thread and XLA:CPU's thread pool, as "
              "comma-separated ids (e.g. '3'); applied when the node starts, before JAX does. One CPU halves the "
              "VMP/MMP programs that XLA runs on its pool (XLA sizes the pool to it); FPI programs run inline and do "
              "not change (benchmarks/README.md, Threads). Empty: the OS schedules every thread.", read_only=True),
    ParamSpec("jax_compilation_cache_dir", "~/.cache/bayes_infer_ros/jax", "JAX persistent compilation cache folder "
              "(a second start reuses compiled programs). Empty disables it. A folder that cannot be written is a warning; the "
              "node then runs without the cache.", read_only=True),
    ParamSpec("jax_compilation_cache_max_mb", 1024, "MiB. The compilation cache folder is pruned (least recently used "
              "entries first) to this size at configure and after each engine build.", read_only=True,
              int_range=(1, 1048576)),
    ParamSpec("diagnostics_period", 1.0, "Seconds between /diagnostics messages (steady clock).", read_only=True,
              float_range=(0.05, 60.0)),
    ParamSpec("autostart", False, "Lifecycle mode: configure and activate at start (what launch's autostart does).",
              read_only=True),
    # policy inference after the beliefs (docs/policy.md, docs/node.md "Policy inference"); all read at configure
    ParamSpec("policy.inference", "auto", "Policy inference after each tick's beliefs (pymdp's infer_policies and "
              "sample_action; ~/policy): auto (when the model has preferences model.C.* and transitions B), enabled "
              "(any model with B; without C, pymdp's default: no preference) or disabled. Read at configure.",
              choices=POLICY_INFERENCE),
    ParamSpec("policy.len", 0, "Steps of each policy (pymdp's policy_len): every combination of the factors' "
              "controls at each step, unless policy.policies lists them. 0: the model's (its model file's policy.len "
              "or policies, else 1). Read at configure.", int_range=(0, 64)),
    ParamSpec("policy.policies", [], "The policies, flattened (P, steps, F) in C order (steps: policy.len, else "
              "the model's); empty (the default; leave it out of a params file): the model's, else every combination "
              "of the factors' controls. Read at configure."),
    ParamSpec("policy.gamma", POLICY_PARAMETERS["policy.gamma"].default,
              POLICY_PARAMETERS["policy.gamma"].description + " Read at configure.", float_range=(0.0, 1e6)),
    ParamSpec("policy.terms", list(TERMS), POLICY_PARAMETERS["policy.terms"].description + " Read at configure."),
    ParamSpec("policy.selection", POLICY_PARAMETERS["policy.selection"].default,
              POLICY_PARAMETERS["policy.selection"].description + " Read at configure.", choices=SELECTIONS),
    ParamSpec("policy.sampling_mode", POLICY_PARAMETERS["policy.sampling_mode"].default,
              POLICY_PARAMETERS["policy.sampling_mode"].description + " Read at configure.", choices=SAMPLING_MODES),
    ParamSpec("policy.alpha", POLICY_PARAMETERS["policy.alpha"].default,
              POLICY_PARAMETERS["policy.alpha"].description + " Read at configure.", float_range=(0.0, 1e6)),
    ParamSpec("policy.seed", POLICY_PARAMETERS["policy.seed"].default, "Stochastic selection's seed: the node's "
              "n-th policy step since configure or ~/reset samples as step n of pymdp's rollout(..., "
              "jax.random.PRNGKey(seed)) with one agent per row. Read at configure.", int_range=(0, MAX_SEED)),
    ParamSpec("policy.publish_controls", False, "Feed each agent's chosen control back as its next tick's control, "
              "as a Controls message stamped at the tick would be (the closed active-inference loop). A Controls "
              "message on controls stamped after the tick takes over from it. Read at configure."),
)
SPECS: dict[str, ParamSpec] = {p.name: p for p in PARAMETERS}


def parse_cpus(value: Any) -> frozenset[int]:
    """``cpu_affinity``'s value as a set of CPU ids (empty: no restriction); ValueError naming the field when it is
    not comma-separated integers among the CPUs this process may use."""
    if not isinstance(value, str):
        raise ValueError(f"cpu_affinity: expected a string of comma-separated CPU ids, got {value!r}")
    if not value.strip():
        return frozenset()
    try:
        cpus = frozenset(int(part) for part in value.split(","))
    except ValueError:
        raise ValueError(f"cpu_affinity: expected comma-separated CPU ids such as '3' or '2,3', got {value!r}") from None
    allowed = os.sched_getaffinity(0)
    if not cpus <= allowed:
        raise ValueError(f"cpu_affinity: CPUs {sorted(cpus - allowed)} are not available to this process "
                         f"(available: {sorted(allowed)})")
    return cpus


def validate_change(name: str, value: Any, *, variants: Sequence[str], has_B: bool,
                    pending: Optional[Mapping[str, Any]] = None, startup: bool = False) -> Optional[str]:
    """Reason to refuse setting ``name`` to ``value`` (None: accepted). ``pending``: the other values set in
    the same call (an atomic set of algorithm + variant is checked as a whole). ``startup``: the value comes
    from the command line / params file (read-only parameters may be set then)."""
    pending = dict(pending or {})
    spec = SPECS.get(name)
    if spec is None and name.startswith(SURPRISE_PREFIXES):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            return f"{name}: expected a positive number of nats, got {value!r}"
        return None
    if spec is None:
        return None  # not ours (use_sim_time, model.*: read-only, rclpy checks those)
    if spec.read_only and not startup:
        return (f"{name} is read-only: it is read once when the node starts; set it in the params file or with "
                f"`--ros-args -p {name}:=VALUE` and restart the node")
    if spec.choices is not None and value not in spec.choices:
        return f"{name}: {value!r} is not one of {list(spec.choices)}"
    if name == "agents":
        try:
            parse_agents(value)
        except ValueError as exc:
            return str(exc)
    if name == "model_file" and not startup:
        reason = model_file_refused(value)
        if reason is not None:
            return reason
    if name == "cpu_affinity":
        try:
            parse_cpus(value)
        except ValueError as exc:
            return str(exc)
    if name in LIST_CHECKS:
        try:
            LIST_CHECKS[name](value)
        except ValueError as exc:
            return str(exc)
    if name == "algorithm" and algorithm_spec(value).window and not has_B:
        return f"algorithm: {value} needs transition tensors B; the model has none (use fpi)"
    if name == "variant":
        allowed = ("auto",) + tuple(variants)
        if value not in allowed:
            return f"variant: {value!r} is not one of {list(allowed)}"
    if spec.int_range is not None:
        lo, hi = spec.int_range
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            return f"{name}: expected an integer in [{lo}, {hi}], got {value!r}"
    if spec.float_range is not None:
        lo, hi = spec.float_range
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not lo <= value <= hi:
            return f"{name}: expected a finite number in [{lo:g}, {hi:g}], got {value!r}"
        if name == "tau" and value <= 0:
            return "tau: expected > 0"
        if name == "rate_hz" and 0 < value < MIN_RATE_HZ:
            return (f"rate_hz: expected 0 (event-driven) or at least {MIN_RATE_HZ:g} Hz (a tick period of at most "
                    f"{1 / MIN_RATE_HZ:g} s), got {value!r}")
    return None


def parse_terms(value: Any) -> tuple[str, ...]:
    """``policy.terms`` as a tuple of names; ValueError naming it unless distinct names from ``TERMS``."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(isinstance(t, str) for t in value):
        raise ValueError(f"policy.terms: expected a list of names from {list(TERMS)}, got {value!r:.80}")
    try:
        check_terms(value)
    except ValueError as exc:
        raise ValueError(f"policy.{exc}") from None
    return tuple(value)


def parse_policies(value: Any) -> tuple[int, ...]:
    """``policy.policies`` as a tuple of controls (their shape is checked against the model at configure);
    ValueError naming it unless a list of non-negative integers."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) and type(value).__name__ != "array":
        raise ValueError(f"policy.policies: expected a list of control indices, got {value!r:.80}")
    if not all(isinstance(u, int) and not isinstance(u, bool) and u >= 0 for u in value):
        raise ValueError(f"policy.policies: expected non-negative integers (control indices), got {list(value)!r:.80}")
    return tuple(int(u) for u in value)


# The list parameters' checks: each returns the value as its settings field holds it, or raises naming the parameter.
LIST_CHECKS = {"policy.terms": parse_terms, "policy.policies": parse_policies}


def node_budget(budget_mb: float) -> MemoryBudget:
    """The node's ``memory_budget_mb`` as the one budget type."""
    return MemoryBudget.from_mib(budget_mb, "memory_budget_mb")


def change_refused(changes: Sequence[tuple[str, Any]], *, variants: Sequence[str], model: Any = None,
                   memory_budget_mb: float = 2048.0) -> Optional[str]:
    """Why one parameter request ((name, value) pairs, validated together) is refused; None: accepted. ``model``: the
    configured model (None before configure: a variant is then held to the budget at configure); a variant given by
    name is held to ``memory_budget_mb`` (or the request's own value of it)."""
    batch = dict(changes)
    has_B = model.B is not None if model is not None else True
    for name, value in changes:
        reason = validate_change(name, value, variants=variants, has_B=has_B, pending=batch)
        if reason is None and name == "variant" and value != "auto" and model is not None:
            try:
                node_budget(float(batch.get("memory_budget_mb", memory_budget_mb))).check(value, model)
            except ValueError as exc:
                reason = str(exc)
        if reason is not None:
            return reason
    return None


# Per-modality parameters (one per modality of the model, nats), read at configure: surprise_gate.<modality> refuses a
# reading whose surprise is above it as an outlier, surprise_threshold.<modality> is where its recent mean warns.
SURPRISE_PREFIXES = ("surprise_gate.", "surprise_threshold.")


def read_at_configure(name: str) -> bool:
    """``model_file``, ``model.*``, ``agents``, ``evidence``, ``surprise_*``, ``policy.*``, ``controls.*`` and
    ``events.*``: read by configure only (a change applies at the next configure)."""
    return (name in ("model_file", "agents", "evidence")
            or name.startswith(("model.", "surprise_", "policy.", "controls.", "events.")))


_AGENT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(/[A-Za-z][A-Za-z0-9_]*)*$")


MAX_AGENTS = 256  # agents per node: each agent has M + F + 3 ROS entities; configure and shutdown grow past linear


def parse_agents(value: Any) -> list[str]:
    """The ``agents`` parameter as a list of names (empty: one agent at the node's namespace); ValueError naming
    the field for a value that is not a list of relative ROS names (letters, digits, ``_``; ``/`` between
    tokens), a name that repeats, or more than ``MAX_AGENTS`` names."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)) and type(value).__name__ != "array":
        raise ValueError(f"agents: expected a list of names such as [robot1, robot2], got {value!r}")
    names = list(value)
    if len(names) > MAX_AGENTS:
        raise ValueError(f"agents: at most {MAX_AGENTS} per node, got {len(names)} (each agent's topics and services "
                         "are ROS entities, and a node's configure and shutdown grow faster than linearly in them); "
                         "serve the rest from more nodes")
    for name in names:
        if not isinstance(name, str) or not _AGENT_NAME.match(name):
            raise ValueError(f"agents: {name!r} is not a relative ROS name (e.g. robot1 or fleet/robot1)")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"agents: names must be unique; {repeated} repeat")
    return names


def model_file_refused(value: Any) -> Optional[str]:
    """Why ``model_file`` cannot be set to ``value`` at runtime (None: accepted; its contents are checked at
    configure): not a string, or a path that does not exist."""
    if not isinstance(value, str):
        return f"model_file: expected a path string, got {value!r}"
    if value and not os.path.isfile(os.path.expanduser(value)):
        return f"model_file: {value!r} does not exist (or is not a file); the model in use is kept"
    return None


def allowed_model_keys(factors: Sequence[str], modalities: Sequence[str]) -> set[str]:
    """Every ``model.*`` parameter name the loader reads for these names (others are warned about)."""
    keys = {"model.factors", "model.modalities"}
    for m in modalities:
        keys |= {f"model.A.{m}.{k}" for k in ("shape", "data", "dependencies", "labels")}
    for f in factors:
        keys |= {f"model.B.{f}.{k}" for k in ("shape", "data", "dependencies", "controls")}
        keys |= {f"model.D.{f}", f"model.states.{f}"}
    return keys | {f"model.C.{m}" for m in modalities} | {"model.E"}


def unknown_parameters(names: Iterable[str], known: Iterable[str], known_prefixes: Sequence[str] = ("model.",)) -> list[str]:
    """Warnings for params-file keys the node does not know, each with a "did you mean" when one is close."""
    known = sorted(set(known))
    out = []
    for name in sorted(names):
        if name in known or name == "use_sim_time" or name.startswith("qos_overrides.") or any(name.startswith(p) for p in known_prefixes):
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
        out.append(f"unknown parameter '{name}' ignored" + (f" (did you mean '{close[0]}'?)" if close else ""))
    return out
