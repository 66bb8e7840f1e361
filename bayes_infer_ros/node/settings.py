"""The node's settings as one typed, frozen snapshot (no rclpy): :class:`NodeSettings`.

``ros/`` reads the node's parameters once into a snapshot (:meth:`NodeSettings.from_values`) and hands it down; an
accepted parameter change, a ``~/switch_variant`` or a configure makes a new one. ``node/`` reads fields, never
parameters: what a tick, a build or a status needs is an attribute of the snapshot it was given.

The fields are the rows of the parameter table (``parameters.PARAMETERS``, whose names and defaults they mirror:
``test/node/test_settings.py`` holds them together): a row ``name`` is the field ``name``, a row ``policy.<x>`` the
field ``x`` of the typed group ``policy`` (:class:`PolicySettings`); plus ``use_sim_time`` and the groups of nested
parameters a params file may hold (``model.*``, ``adapters.*``, ``surprise_gate.*`` / ``surprise_threshold.*``,
``controls.*``, ``events.*``), each a read-only mapping from the full parameter name to its value.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from ..autotune import EngineConfig
from ..inference.policy import TERMS
from .parameters import ENGINE_PARAMETERS, LIST_CHECKS, SPECS, parse_agents

#: The groups of nested parameters, by prefix: the field that holds each.
GROUPS = {"model.": "model", "adapters.": "adapters", "surprise_gate.": "surprise", "surprise_threshold.": "surprise",
          "controls.": "controls", "events.": "events"}
#: The typed groups of table rows, by prefix: the field that holds each (a frozen dataclass of the rows' values).
TYPED_GROUPS = {"policy.": "policy"}
_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True)
class PolicySettings:
    """The ``policy.*`` rows (docs/node.md, "Policy inference"), read at configure: ``inference`` auto | enabled |
    disabled; ``len`` (0: the model's) and ``policies`` (flattened (P, steps, F); empty: the model's) decide the
    policies; ``gamma``, ``terms``, ``selection``, ``sampling_mode``, ``alpha`` are pymdp's; ``seed`` stochastic
    selection's; ``publish_controls`` feeds the chosen control back."""

    inference: str = "auto"
    len: int = 0
    policies: tuple[int, ...] = ()
    gamma: float = 1.0
    terms: tuple[str, ...] = TERMS
    selection: str = "deterministic"
    sampling_mode: str = "full"
    alpha: float = 1.0
    seed: int = 0
    publish_controls: bool = False

    def model_parameters(self) -> dict[str, Any]:
        """The rows read with the model (``model.io``): ``policy.len`` and ``policy.policies`` where given."""
        out: dict[str, Any] = {}
        if self.len:
            out["policy.len"] = self.len
        if self.policies:
            out["policy.policies"] = list(self.policies)
        return out

    def plan_settings(self) -> dict[str, Any]:
        """``inference.policy.plan_policies``' settings: gamma, alpha, terms, selection, sampling_mode."""
        return dict(gamma=self.gamma, alpha=self.alpha, terms=self.terms, selection=self.selection,
                    sampling_mode=self.sampling_mode)


@dataclass(frozen=True)
class NodeSettings:
    """Every parameter the node reads, at one moment (defaults: the parameter table's)."""

    model_file: str = ""
    agents: tuple[str, ...] = ()
    algorithm: str = "fpi"
    variant: str = "auto"
    autotune_verify_top_k: int = 3
    num_iter: int = 16
    tau: float = 1.0
    horizon: int = 5
    rate_hz: float = 10.0
    observation_timeout: float = 1.0
    silence_clock: str = "node"
    max_future_stamp: float = 0.5
    memory_budget_mb: float = 2048.0
    tick_without_observations: bool = False
    evidence: bool = True
    surprise_window: int = 100
    surprise_warn_ticks: int = 10
    observation_qos_depth: int = 5
    beliefs_qos_depth: int = 1
    device: str = "auto"
    cpu_affinity: str = ""
    jax_compilation_cache_dir: str = "~/.cache/bayes_infer_ros/jax"
    jax_compilation_cache_max_mb: int = 1024
    diagnostics_period: float = 1.0
    autostart: bool = False
    use_sim_time: bool = False
    model: Mapping[str, Any] = field(default_factory=lambda: _EMPTY, compare=False)
    adapters: Mapping[str, Any] = field(default_factory=lambda: _EMPTY, compare=False)
    surprise: Mapping[str, Any] = field(default_factory=lambda: _EMPTY, compare=False)
    controls: Mapping[str, Any] = field(default_factory=lambda: _EMPTY, compare=False)
    events: Mapping[str, Any] = field(default_factory=lambda: _EMPTY, compare=False)
    policy: PolicySettings = field(default_factory=PolicySettings)

    @staticmethod
    def reads(name: str) -> bool:
        """The snapshot holds parameter ``name``: a row of the table, ``use_sim_time`` or a nested group's."""
        return name in SPECS or "." not in name or name.startswith(tuple(GROUPS))

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> "NodeSettings":
        """A snapshot of parameter ``values`` by name (a params file's ``/**`` section, the node's parameters): the
        table's defaults for the names it lacks; names the node does not read are left out. ``agents`` and the list
        rows are checked (ValueError naming them); every other value as validated by the parameter callbacks."""
        own = {f.name for f in dataclasses.fields(cls)} - set(GROUPS.values()) - set(TYPED_GROUPS.values())
        kwargs: dict[str, Any] = {n: _typed(n, v) for n, v in values.items() if n in own}
        groups: dict[str, dict[str, Any]] = {name: {} for name in set(GROUPS.values())}
        for name, value in values.items():
            for prefix, group in GROUPS.items():
                if name.startswith(prefix):
                    groups[group][name] = value
        kwargs.update({group: MappingProxyType(dict(items)) for group, items in groups.items()})
        return cls(**kwargs).replace(**{n: v for n, v in values.items()
                                        if n in SPECS and n.startswith(tuple(TYPED_GROUPS))})

    def replace(self, **changes: Any) -> "NodeSettings":
        """The snapshot with ``changes`` (parameter values by name, ``policy.gamma`` as well as ``rate_hz``)
        applied."""
        own: dict[str, Any] = {}
        typed: dict[str, dict[str, Any]] = {}
        for name, value in changes.items():
            prefix, _, rest = name.partition(".")
            if rest and f"{prefix}." in TYPED_GROUPS and name in SPECS:
                typed.setdefault(TYPED_GROUPS[f"{prefix}."], {})[rest] = _typed(name, value)
            elif not rest:
                own[name] = _typed(name, value)
            else:
                raise TypeError(f"replace: {name!r} is no field of the snapshot")
        for group, values in typed.items():
            own[group] = dataclasses.replace(getattr(self, group), **values)
        return dataclasses.replace(self, **own)

    @property
    def engine(self) -> EngineConfig:
        """What the engine is built from: the engine parameters, the device, the number of agents and whether each
        step computes its evidence."""
        return EngineConfig(self.algorithm, self.variant, self.num_iter, self.tau, self.horizon,
                            self.autotune_verify_top_k, self.device, max(len(self.agents), 1), self.evidence)

    @property
    def event_mode(self) -> bool:
        """Ticks follow the observations (``rate_hz`` 0) instead of a timer."""
        return self.rate_hz == 0.0

    def engine_differs(self, config: EngineConfig) -> dict[str, Any]:
        """The engine parameters whose value here is not what ``config`` runs, with the value it runs."""
        return {n: getattr(config, n) for n in ENGINE_PARAMETERS if getattr(self, n) != getattr(config, n)}


def _typed(name: str, value: Any) -> Any:
    """A parameter's value as its field holds it: ``agents`` a tuple of names, numbers as the table types them."""
    if name == "agents":
        return tuple(parse_agents(value))
    if name in LIST_CHECKS:
        return LIST_CHECKS[name](value)
    spec = SPECS.get(name)
    if spec is not None and spec.float_range is not None and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value
