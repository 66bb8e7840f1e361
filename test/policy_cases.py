"""What the policy tests of the node (test/node/test_policy_stage.py) and over a ROS graph (test/ros/
test_policy_topic.py) give the default model: its preferences C (config/agent.yaml has none)."""
from __future__ import annotations

#: The default model's preferences: charging and a high voltage; no preference over the other readings.
DEFAULT_C = {"rfid_tag": [0.0] * 5, "voltage": [1.0, 0.0, -2.0], "lidar_gap": [0.0, 0.0], "charging": [2.0, 0.0]}
#: The same as model.C.<modality> parameters.
DEFAULT_C_PARAMETERS = {f"model.C.{m}": c for m, c in DEFAULT_C.items()}
