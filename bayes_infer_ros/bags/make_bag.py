"""The sample bag: a model's simulated episode written as a rosbag2 bag, regenerable bit for bit (``bayes-infer
make-bag``: ``cli/make_bag.py``).

``--adapters PARAMS.yaml``: the modalities with a sensor adapter in that params file are written as the sensor
messages it reads (``config/agent_adapters.yaml``: BatteryState, LaserScan, String; ``config/robot_adapters.yaml``:
Odometry, Imu, JointState, Detection2DArray, LaserScan, BatteryState, Range), values drawn uniformly within
each level's bin, and the factors with a control adapter there get their controls as the commands it reads
(``config/robot_adapters.yaml``: a Twist on ``cmd_vel``); the same seed simulates the same episode as the
categorical bag.

``--fault``: sensor faults injected into the episode (``faults.DEFAULT_FAULTS``: the lidar sector stuck at one level
for 5 s, then the battery driver's voltage and charging readings at random levels for 5 s); the true states are the
simulated ones, and the bag's ``custom_data["faults"]`` records where the faulty readings are."""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

from bayes_infer_ros.model import load_model

from .bagio import write_episode_bag
from .faults import DEFAULT_FAULTS, FAULTS_KEY, SensorFault, inject, schedule_json
from .sensor_messages import load_adapters, load_controls
from .simulate import simulate

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_MODEL = REPO_ROOT / "config" / "agent.yaml"
DEFAULT_BAG = REPO_ROOT / "bags" / "agent_sample"
# The committed sample bag is made with exactly these values (the test regenerates it with them).
SAMPLE_STEPS = 200
SAMPLE_SEED = 7
SAMPLE_DT_S = 0.1
__all__ = ["DEFAULT_BAG", "DEFAULT_FAULTS", "DEFAULT_MODEL", "SAMPLE_DT_S", "SAMPLE_SEED", "SAMPLE_STEPS",
           "make_sample_bag"]


def make_sample_bag(out: Path, model_path: Path = DEFAULT_MODEL, steps: int = SAMPLE_STEPS,
                    seed: int = SAMPLE_SEED, dt_s: float = SAMPLE_DT_S, adapters: Optional[Path] = None,
                    faults: Sequence[SensorFault] = ()) -> Path:
    """Simulate ``steps`` steps of the model with ``seed`` into a bag at ``out``; ``faults`` replace readings
    (``faults.inject``)."""
    model = load_model(model_path)
    rollout = simulate(model, steps, seed)
    custom = {"seed": str(seed), "model_file": Path(model_path).name}
    if faults:
        rollout, schedule = inject(model, rollout, faults, dt_s, seed)
        custom[FAULTS_KEY] = schedule_json(schedule)
    specs, controls = {}, {}
    if adapters is not None:
        specs = load_adapters(adapters, model)
        controls = load_controls(adapters, model)
        custom["adapters_file"] = Path(adapters).name
    return write_episode_bag(out, model, rollout, dt_s=dt_s, custom_data=custom, adapters=specs, sensor_seed=seed,
                             controls=controls)
