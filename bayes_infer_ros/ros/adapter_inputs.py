"""The node's sensor adapters: the ``adapters.*`` parameters checked against the configured model and the message
classes, and each adapted message turned into a level and a stamp (the pure part is ``bayes_infer_ros.adapters``).

An adapted modality is subscribed on its adapter's topic with its message type (SensorDataQoS, as
``observations/<modality>`` would be) instead of ``observations/<modality>``. Its stamp is the message's
``header.stamp``; a message without a header is unstamped (it stands for its arrival time, ``admission.py``).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Mapping

from bayes_infer_ros.adapters import (
    AdapterConfigError, AdapterSpec, Reading, check_template, parse_adapters, read_level,
)

DESCRIPTION = ("Sensor adapter (README, 'Sensor adapters'): the modality reads this message instead of "
               "observations/<modality>. Read at configure.")


def message_class(typename: str) -> type:
    """The generated class of ``pkg/msg/Name`` (``adapters.config.normalize_type`` checked the name)."""
    pkg, kind, name = typename.split("/")
    module = importlib.import_module(f"{pkg}.{kind}")
    if not hasattr(module, name):
        raise ImportError(f"{pkg}.{kind} has no {name}")
    return getattr(module, name)


@dataclass(frozen=True)
class AdaptedReading:
    """A message's level (or the reason it is refused) and its header stamp ((0, 0): none)."""

    reading: Reading
    sec: int = 0
    nanosec: int = 0


class AdapterInputs:
    """The adapters of one configured model, by modality index."""

    def __init__(self, specs: Mapping[str, AdapterSpec]):
        self.specs = {spec.modality_index: spec for spec in specs.values()}
        self.classes: dict[int, type] = {}
        for i, spec in self.specs.items():
            try:
                cls = message_class(spec.type)
            except (ImportError, ValueError) as exc:
                raise AdapterConfigError(f"{spec.param}.type: {spec.type!r} cannot be imported ({exc}); is its "
                                         "package installed and sourced?") from None
            check_template(spec, cls())
            self.classes[i] = cls

    @classmethod
    def from_parameters(cls, params: Mapping[str, Any], model: Any) -> "AdapterInputs":
        """``params``: the node's ``adapters.*`` parameters (flat names); ``model``: the configured model."""
        names = [model.modality_name(i) for i in range(model.num_modalities)]
        labels = [model.observation_label_list(i) for i in range(model.num_modalities)]
        return cls(parse_adapters(params, names, labels))

    def subscription(self, i: int, name: str, observation_type: type, prefix: str = "") -> tuple[type, str]:
        """(message class, topic) that modality ``i`` (``name``) of the agent whose topics are under ``prefix``
        (``<agent>/``, "" for a node's single agent) reads: its adapter's (a relative adapter topic under the
        prefix), or ``observation_type`` on ``<prefix>observations/<name>``."""
        spec = self.specs.get(i)
        if spec is None:
            return observation_type, f"{prefix}observations/{name}"
        return self.classes[i], spec.topic if spec.topic.startswith(("/", "~")) else prefix + spec.topic

    def observation(self, i: int, msg: Any) -> dict[str, Any]:
        """The node's admission arguments for ``msg`` (``level``, ``probabilities``, ``sec``, ``nanosec``,
        ``refused``: (reason, detail) or None); see :meth:`read`. Never raises."""
        got = self.read(i, msg)
        return dict(level=-1 if got.reading.level is None else got.reading.level, probabilities=(), sec=got.sec,
                    nanosec=got.nanosec, refused=None if got.reading.ok else (got.reading.reason, got.reading.detail))

    def read(self, i: int, msg: Any) -> AdaptedReading:
        """Modality ``i``'s level in ``msg`` and its stamp. Never raises."""
        try:
            reading = read_level(msg, self.specs[i])
        except Exception as exc:  # noqa: BLE001 - a message must never take the node down
            reading = Reading(None, "missing_field", f"{type(exc).__name__}: {exc}")
        stamp = getattr(getattr(msg, "header", None), "stamp", None)
        if stamp is None:
            return AdaptedReading(reading)
        return AdaptedReading(reading, int(stamp.sec), int(stamp.nanosec))
