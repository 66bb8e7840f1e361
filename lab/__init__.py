"""The lab: what made the product fast and keeps it honest, not installed with it.

The paper's POMDP generator (``generator``), the timing harness (``harness``), the dozen-model variants benchmark
(``variants_benchmark``), reports and README tables (``report``, ``readme_tables``), autotuner training
(``train_autotuner``), XLA:CPU's execution-mode probe (``xla_mode``), the pymdp oracle (``pymdp_oracle``, and the
golden replay values through it, ``golden_pymdp``), the rclpy API checker (``rclpy_api``), the agent-process and
replay-session harnesses of the tests and the demo (``agent_process``, ``replay_session``) and the demo (``demo``).
It uses ``bayes_infer_ros``; nothing there imports it. Commands: ``python -m lab COMMAND`` from a checkout
(``make demo``, ``make bench`` and the benchmarks' scripts call it).
"""
