"""The one checker of the adapters' settings (pure: no rclpy): every ``adapters.<modality>.*`` parameter, and the
message definition it reads when a lookup is given, checked into specs and refusals. It never raises: a setting that
cannot be used is a :class:`Refusal` naming its key (``adapters.voltage.bins``) and what was expected.

The node (through :func:`parse_adapters`, which raises the first refusal), ``make-bag --adapters`` and ``bayes-infer
model validate`` (every refusal, offline, against the message definitions available there) all go through
:func:`check_adapters`. The checker is written for any key prefix and any targets, so that other settings reuse it:

- :func:`check_bindings`: a message field (a type, a path, bins or levels) bound to one of some targets' levels,
  under any prefix. ``adapters.`` binds to the model's modalities and their observation levels; a
  ``controls.<factor>`` field binding (``controls.py``) binds a Twist's field to a factor's control levels the same
  way (through :func:`parse_adapter` and :func:`check_definition`).
- :func:`check_group`: any settings grouped as ``<prefix><name>.<key>``, each group checked by a function that raises
  AdapterConfigError (``controls.<factor>`` in ``controls.py``, ``events.<name>`` in ``events.py``); the result is
  a :class:`Checked`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, Mapping, Optional, Sequence, TypeVar

from .config import KEYS, PREFIX, AdapterConfigError, AdapterSpec, parse_adapter
from .schema import Lookup, check_spec

T = TypeVar("T")


@dataclass(frozen=True)
class Refusal:
    """A setting that cannot be used: ``key``, the parameter's full name (``adapters.voltage.bins``, or
    ``adapters.voltage`` for the adapter as a whole), and ``problem``, what was expected."""

    key: str
    problem: str

    def __str__(self) -> str:
        return f"{self.key}: {self.problem}"

    @classmethod
    def of(cls, exc: AdapterConfigError) -> "Refusal":
        key, _, problem = str(exc).partition(": ")
        return cls(key, problem)


@dataclass(frozen=True)
class Checked(Generic[T]):
    """What the checker accepted, by name, and what it refused (sorted by name, at most one refusal per name: the
    first key of it that cannot be used)."""

    accepted: Mapping[str, T]
    refusals: tuple[Refusal, ...]

    @property
    def ok(self) -> bool:
        return not self.refusals

    def raise_first(self) -> dict[str, T]:
        """The accepted settings; AdapterConfigError with the first refusal when there is one."""
        if self.refusals:
            raise AdapterConfigError(str(self.refusals[0]))
        return dict(self.accepted)


def group_settings(params: Mapping[str, Any], prefix: str,
                   keys: Sequence[str] = KEYS) -> tuple[dict[str, dict[str, Any]], list[Refusal]]:
    """``<prefix><name>.<key>`` -> {name: {key: value}}; a parameter with no key (``adapters.voltage``) is a
    refusal (naming ``keys``, the keys a group takes). Other names are ignored."""
    groups: dict[str, dict[str, Any]] = {}
    refusals = []
    for full, value in params.items():
        if not isinstance(full, str) or not full.startswith(prefix):
            continue
        name, _, key = full[len(prefix):].partition(".")
        if not key:
            refusals.append(Refusal(full, f"expected {prefix}<name>.<key> (keys: {list(keys)})"))
            continue
        groups.setdefault(name, {})[key] = value
    return groups, refusals


def check_group(params: Mapping[str, Any], prefix: str, check_one: Callable[[str, Mapping[str, Any]], T],
                keys: Sequence[str] = KEYS) -> Checked[T]:
    """Every group of ``<prefix><name>.*`` settings through ``check_one(name, keys)``, which returns what it
    accepts or raises AdapterConfigError naming the key; those become refusals. ``keys``: the keys a group takes
    (named when a parameter has none)."""
    groups, refusals = group_settings(params, prefix, keys)
    accepted: dict[str, T] = {}
    for name, keys in sorted(groups.items()):
        try:
            accepted[name] = check_one(name, keys)
        except AdapterConfigError as exc:
            refusals.append(Refusal.of(exc))
    return Checked(accepted, tuple(sorted(refusals, key=lambda r: r.key)))


def check_definition(spec: AdapterSpec, lookup: Lookup) -> None:
    """``spec`` against its message type's definition (``schema.check_spec``); a type the lookup has no definition
    for (it raises LookupError or OSError saying why) is refused as ``<param>.type``."""
    try:
        lookup(spec.type)
    except (LookupError, OSError, AdapterConfigError) as exc:
        raise AdapterConfigError(f"{spec.param}.type: {exc}") from None
    try:
        check_spec(spec, lookup)
    except (LookupError, OSError) as exc:
        raise AdapterConfigError(f"{spec.param}.field: a message type on its path has no definition here: "
                                 f"{exc}") from None


def check_bindings(params: Mapping[str, Any], prefix: str, targets: Sequence[tuple[str, Sequence[str]]],
                   lookup: Optional[Lookup] = None) -> Checked[AdapterSpec]:
    """Every ``<prefix><name>.*`` binding of a message field to a target's levels (``targets``: (name, level
    labels) in the model's order), checked against the message definitions when ``lookup`` is given."""
    names = [name for name, _ in targets]
    labels = [list(levels) for _, levels in targets]

    def one(name: str, keys: Mapping[str, Any]) -> AdapterSpec:
        spec = parse_adapter(name, keys, names, labels, prefix)
        if lookup is not None:
            check_definition(spec, lookup)
        return spec
    return check_group(params, prefix, one)


def check_adapters(params: Mapping[str, Any], modality_names: Sequence[str], level_labels: Sequence[Sequence[str]],
                   lookup: Optional[Lookup] = None) -> Checked[AdapterSpec]:
    """Every ``adapters.*`` parameter of ``params`` (flat ROS names -> values) for a model with these modalities
    and observation labels; with ``lookup``, against the message definitions too. Never raises."""
    return check_bindings(params, PREFIX, list(zip(modality_names, level_labels)), lookup)


def parse_adapters(params: Mapping[str, Any], modality_names: Sequence[str],
                   level_labels: Sequence[Sequence[str]]) -> dict[str, AdapterSpec]:
    """Every adapter in ``params``, by modality (the settings alone: the node checks the definitions when it has
    imported the message classes); AdapterConfigError with the first refusal."""
    return check_adapters(params, modality_names, level_labels).raise_first()
