"""Sensor faults injected into a simulated episode (``bayes-infer make-bag --fault``), and where they are.

A fault replaces one modality's readings over a stretch of steps, while the true states go on as simulated:

- ``stuck``: the sensor repeats one level (a frozen lidar sector);
- ``random``: the sensor reports uniformly random levels (a battery driver publishing garbage).

The default schedule (:data:`DEFAULT_FAULTS`) is the default model's: the lidar sector stuck at ``gap`` for 5 s from
6 s, then the battery driver random for 5 s from 11 s (its two readings, ``voltage`` and ``charging``, both come from
one ``BatteryState`` message). A bag records its schedule in ``custom_data["faults"]``
(JSON, steps resolved), so :func:`fault_mask` tells the faulty readings of a recorded bag from the rest. Random
levels are drawn with the episode's seed (inverse-CDF draws of PCG64 doubles, as ``simulate``): a bag regenerates
bit for bit.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

import numpy as np

from bayes_infer_ros.model import GenerativeModel

from .simulate import Rollout

FAULT_KINDS = ("stuck", "random")
FAULTS_KEY = "faults"  # custom_data key of a bag's fault schedule


@dataclass(frozen=True)
class SensorFault:
    """One modality's readings replaced from ``start_s`` for ``duration_s`` seconds of the episode.

    ``level``: the stuck level (a label or an index; ``stuck`` only)."""

    modality: str
    kind: str
    start_s: float
    duration_s: float
    level: Optional[str] = None


DEFAULT_FAULTS: tuple[SensorFault, ...] = (
    SensorFault("lidar_gap", "stuck", 6.0, 5.0, "gap"),
    # one BatteryState message carries both (config/agent_adapters.yaml): a broken driver garbles both
    SensorFault("voltage", "random", 11.0, 5.0),
    SensorFault("charging", "random", 11.0, 5.0),
)


def _level(model: GenerativeModel, modality: int, level) -> int:
    labels = list(model.observation_labels[modality]) if model.observation_labels else []
    if isinstance(level, str) and level in labels:
        return labels.index(level)
    try:
        index = int(level)
    except (TypeError, ValueError):
        raise ValueError(f"fault level: {level!r} is not a level of {model.modality_name(modality)} "
                         f"(labels {labels})") from None
    if not 0 <= index < model.num_obs[modality]:
        raise ValueError(f"fault level: {index} is out of range for {model.modality_name(modality)} "
                         f"({model.num_obs[modality]} levels)")
    return index


def resolve(model: GenerativeModel, faults: Sequence[SensorFault], num_steps: int, dt_s: float) -> list[dict]:
    """Each fault with its modality index, level index and steps ``[start, end)`` (clipped to the episode); a fault
    naming no modality of the model, an unknown kind or level is refused naming it."""
    names = [model.modality_name(i) for i in range(model.num_modalities)]
    out = []
    for fault in faults:
        if fault.modality not in names:
            raise ValueError(f"fault: {fault.modality!r} is not a modality of the model ({names})")
        if fault.kind not in FAULT_KINDS:
            raise ValueError(f"fault: kind {fault.kind!r} is not one of {list(FAULT_KINDS)}")
        i = names.index(fault.modality)
        start = min(max(int(round(fault.start_s / dt_s)), 0), num_steps)
        end = min(max(int(round((fault.start_s + fault.duration_s) / dt_s)), start), num_steps)
        entry = {"modality": fault.modality, "index": i, "kind": fault.kind, "start": start, "end": end}
        if fault.kind == "stuck":
            entry["level"] = _level(model, i, fault.level if fault.level is not None else 0)
        out.append(entry)
    return out


def inject(model: GenerativeModel, rollout: Rollout, faults: Sequence[SensorFault], dt_s: float,
           seed: int) -> tuple[Rollout, list[dict]]:
    """``rollout`` with the faulty readings in place, and the resolved schedule (:func:`resolve`)."""
    schedule = resolve(model, faults, rollout.num_steps, dt_s)
    observations = rollout.observations.copy()
    rng = np.random.default_rng([seed, 0x5E75])  # a stream of its own: the rollout's draws stay as they were
    for entry in schedule:
        i, m = entry["index"], model.num_obs[entry["index"]]
        for t in range(entry["start"], entry["end"]):
            if entry["kind"] == "stuck":
                observations[t, i] = entry["level"]
            else:
                observations[t, i] = min(int(rng.random() * m), m - 1)
    return dataclasses.replace(rollout, observations=observations), schedule


def schedule_json(schedule: Sequence[dict]) -> str:
    """The resolved schedule as ``custom_data["faults"]``."""
    return json.dumps(list(schedule), sort_keys=True, separators=(",", ":"))


def fault_mask(custom_data: Mapping[str, str], num_steps: int, modality_names: Sequence[str]) -> np.ndarray:
    """(T, M) bool: the readings a bag's fault schedule replaced (all False for a bag without one)."""
    mask = np.zeros((num_steps, len(modality_names)), dtype=bool)
    for entry in json.loads(custom_data.get(FAULTS_KEY, "[]")):
        if entry["modality"] in modality_names:
            mask[entry["start"]:entry["end"], list(modality_names).index(entry["modality"])] = True
    return mask
