"""Sample bags: seeded simulation of a model's generative process, written and read with ``rosbags``.

Pure Python: no rclpy (the replay and the recorder, which do use rclpy, live in ``bayes_infer_ros.ros``).
"""
from .bagio import (
    CLOCK_TOPIC, CONTROLS_TOPIC, OBSERVATIONS_PREFIX, TRUE_STATES_TOPIC, Episode, bag_content_digest,
    model_digest, read_custom_data, read_episode, write_episode_bag,
)
from .interfaces import make_typestore
from .simulate import Rollout, simulate

__all__ = [
    "CLOCK_TOPIC", "CONTROLS_TOPIC", "OBSERVATIONS_PREFIX", "TRUE_STATES_TOPIC", "Episode", "Rollout",
    "bag_content_digest", "make_typestore", "model_digest", "read_custom_data", "read_episode", "simulate",
    "write_episode_bag",
]
