"""The node's runtime without ROS: what a configured ``agent_node`` does between receiving a message and publishing
its beliefs, as plain Python that tests drive without a ROS graph.

The settings snapshot (``settings``), the runtime that owns the tick and the running deployment (``runtime``), the
model from the settings (``model_source``), deployments off the tick path (``deployer``), ``~/switch_variant``'s wait
(``switching``), input admission and silence (``admission``), controls (``controls``), message fields <-> arrays
(``conversion``), the tick around the belief filter (``tick_loop``), the parameter table (``parameters``),
statistics, surprise, the node's configure work once (``warmup``), contained callbacks (``callbacks``) and what the
node tells its users (``help_text``). ``bayes_infer_ros.ros`` wires these to rclpy; nothing here imports ROS.
"""
