"""The node's settings as one typed, frozen snapshot (no rclpy): :class:`NodeSettings`.

``ros/`` reads the node's parameters once into a snapshot (:meth:`NodeSettings.from_values`) and hands it down; an
accepted parameter change, a ``~/switch_variant`` or a configure makes a new one. ``node/`` reads fields, never
parameters: what a tick, a build or a status needs is an attribute of the snapshot it was given.

The fields are the rows of the parameter table (``parameters.PARAMETERS``, whose names and defaults they mirror:
``test/node/test_settings.py`` holds them together) plus ``use_sim_time`` and the groups of nested parameters a
params file may hold (``model.*``, ``adapters.*``, ``surprise_gate.*`` / ``surprise_threshold.*``, ``controls.*``,
``events.*``), each a read-only mapping from the full parameter name to its value.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from ..autotune import EngineConfig
from .parameters import ENGINE_PARAMETERS, SPECS, parse_agents

#: The groups of nested parameters, by prefix: the field that holds each.
GROUPS = {"model.": "model", "adapters.": "adapters", "surprise_gate.": "surprise", "surprise_threshold.": "surprise",
          "controls.": "controls", "events.": "events"}
_EMPTY: Mapping[str, Any] = MappingProxyType({})


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

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> "NodeSettings":
        """A snapshot of parameter ``values`` by name (a params file's ``/**`` section, the node's parameters): the
        table's defaults for the names it lacks; names the node does not read are left out. ``agents`` is checked
        (ValueError naming it); every other value as validated by the parameter callbacks."""
        own = {f.name for f in dataclasses.fields(cls)} - set(GROUPS.values())
        kwargs: dict[str, Any] = {n: _typed(n, v) for n, v in values.items() if n in own}
        groups: dict[str, dict[str, Any]] = {name: {} for name in set(GROUPS.values())}
        for name, value in values.items():
            for prefix, group in GROUPS.items():
                if name.startswith(prefix):
                    groups[group][name] = value
        kwargs.update({group: MappingProxyType(dict(items)) for group, items in groups.items()})
        return cls(**kwargs)

    def replace(self, **changes: Any) -> "NodeSettings":
        """The snapshot with ``changes`` (parameter values by name) applied."""
        return dataclasses.replace(self, **{n: _typed(n, v) for n, v in changes.items()})

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
    spec = SPECS.get(name)
    if spec is not None and spec.float_range is not None and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value
