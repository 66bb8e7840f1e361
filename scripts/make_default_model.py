#!/usr/bin/env python3
"""Write config/agent.yaml: the default model, a small warehouse robot, plus the node's default parameters.

Hidden-state factors
  location   (dock, aisle_a, aisle_b, charger)   controls: stay, next, previous  (a loop of 4 places)
  battery    (high, medium, low)                  controls: none (drains while moving, charges at the charger)
  door       (open, closed)                       controls: none (flips with probability 0.1 per tick)
Observation modalities
  rfid_tag   (dock, aisle_a, aisle_b, charger, none): reads the place's tag (0.8), else nothing
  voltage    (high, medium, low): a noisy battery reading
  lidar_gap  (gap, wall): sees the door open only from aisle_b; elsewhere mostly 'wall'
  charging   (charging, idle): current flows at the charger when the battery is not high
Dependencies: rfid_tag <- location; voltage <- battery; lidar_gap <- (location, door); charging <- (location, battery).
B_dependencies: battery depends on (battery, location): it charges at the charger. This exercises
arbitrary B-dependencies (pymdp supports them; the paper left them for future work).
"""
from pathlib import Path

import numpy as np

from bayes_infer_ros.model import GenerativeModel, save_parameters_yaml

LOC = ["dock", "aisle_a", "aisle_b", "charger"]
BAT = ["high", "medium", "low"]
DOOR = ["open", "closed"]


def build() -> GenerativeModel:
    nL, nB, nD = len(LOC), len(BAT), len(DOOR)
    # rfid_tag | location
    rfid = np.zeros((nL + 1, nL))
    for l in range(nL):
        rfid[l, l] = 0.8
        rfid[nL, l] = 0.15
        for k in range(nL):
            if k != l:
                rfid[k, l] = 0.05 / (nL - 1)
    # voltage | battery
    volt = np.array([[0.80, 0.15, 0.05],
                     [0.15, 0.70, 0.20],
                     [0.05, 0.15, 0.75]])
    # lidar_gap | location, door
    gap = np.zeros((2, nL, nD))
    for l in range(nL):
        for d in range(nD):
            p_gap = 0.9 if (LOC[l] == "aisle_b" and DOOR[d] == "open") else (0.05 if LOC[l] == "aisle_b" else 0.1)
            gap[:, l, d] = [p_gap, 1 - p_gap]
    # charging | location, battery
    chg = np.zeros((2, nL, nB))
    for l in range(nL):
        for b in range(nB):
            p = 0.95 if (LOC[l] == "charger" and BAT[b] != "high") else 0.02
            chg[:, l, b] = [p, 1 - p]
    # location' | location, u   (stay, next, previous)
    B_loc = np.zeros((nL, nL, 3))
    for l in range(nL):
        for u, step in enumerate((0, 1, -1)):
            target = (l + step) % nL
            B_loc[target, l, u] += 0.9
            B_loc[l, l, u] += 0.1
    # battery' | battery, location   (one control)
    B_bat = np.zeros((nB, nB, nL, 1))
    for b in range(nB):
        for l in range(nL):
            if LOC[l] == "charger":
                B_bat[max(b - 1, 0), b, l, 0] += 0.7
                B_bat[b, b, l, 0] += 0.3
            else:
                B_bat[min(b + 1, nB - 1), b, l, 0] += 0.1
                B_bat[b, b, l, 0] += 0.9
    # door' | door
    B_door = np.array([[0.9, 0.1], [0.1, 0.9]])[:, :, None]
    return GenerativeModel(
        A=[rfid, volt, gap, chg],
        A_dependencies=[[0], [1], [0, 2], [0, 1]],
        B=[B_loc, B_bat, B_door],
        B_dependencies=[[0], [1, 0], [2]],
        D=[np.array([0.7, 0.1, 0.1, 0.1]), np.array([0.6, 0.3, 0.1]), np.array([0.5, 0.5])],
        factor_names=["location", "battery", "door"],
        modality_names=["rfid_tag", "voltage", "lidar_gap", "charging"],
        state_labels=[LOC, BAT, DOOR],
        observation_labels=[LOC + ["none"], BAT, ["gap", "wall"], ["charging", "idle"]],
        control_labels=[["stay", "next", "previous"], ["none"], ["none"]],
    ).validate()


def write_config(model: GenerativeModel, out: Path) -> None:
    """Replace the ``model:`` block of ``out``, keeping its documented node parameters above it.

    A missing file gets a minimal node section (algorithm/variant) in front of the model.
    """
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / "model.yaml"
        save_parameters_yaml(model, fresh, {"algorithm": "fpi", "variant": "auto"})
        fresh_lines = fresh.read_text().splitlines(keepends=True)
    model_block = fresh_lines[next(i for i, line in enumerate(fresh_lines) if line.startswith("    model:")):]
    if out.exists():
        lines = out.read_text().splitlines(keepends=True)
        head = lines[: next(i for i, line in enumerate(lines) if line.startswith("    model:"))]
    else:
        head = fresh_lines[: len(fresh_lines) - len(model_block)]
    out.write_text("".join(head + model_block))


if __name__ == "__main__":
    out = Path(__file__).resolve().parents[1] / "config" / "agent.yaml"
    write_config(build(), out)
    print(f"wrote {out}")
