"""The node's runtime without ROS: what a configured ``agent_node`` does between receiving a message and publishing
its beliefs, as plain Python that tests drive without a ROS graph.

Input admission and silence (``admission``), controls (``controls``), message fields <-> arrays (``conversion``),
the tick around the belief filter (``tick_loop``), engine builds off the tick path (``builder``), the model and
engine a node runs (``engine_host``), the parameter table (``parameters``), statistics, JAX's cache set-up
(``jax_cache``), the node's configure work once (``warmup``), contained callbacks (``callbacks``) and what the
node tells its users (``help_text``). ``bayes_infer_ros.ros`` wires these to rclpy; nothing here imports ROS.
"""
