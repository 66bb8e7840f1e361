"""Policy inference in the node's tick (no rclpy): after the beliefs, each stepping agent's expected free energy, the
posterior over policies and the chosen control, in one call for all of the node's agents (``inference/policy.py``:
pymdp 1.0.4's ``Agent.infer_policies`` and ``sample_action``; docs/policy.md, docs/node.md "Policy inference").

- :func:`policy_plan` decides at configure, before any engine is built, whether the node runs it (``policy.inference``:
  auto runs it for a model with preferences C and transitions B) and plans it, refusing what does not fit the model
  naming the parameter;
- :class:`PolicyStage` is the tick's part: the agents' beliefs in (b, S) rows (an agent that does not step keeps its
  last beliefs: its row is computed and ignored), stochastic selection's noise drawn as pymdp's ``rollout`` draws it
  from ``policy.seed`` (one step of the stream per call, every agent's row), one call, the per-agent results.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Mapping, Optional

import numpy as np

from ..inference.policy import PolicyInference, PolicyPlan, plan_policies
from .settings import PolicySettings


def policy_plan(settings: PolicySettings, model: Any, dtype: Any = np.float32) -> Optional[PolicyPlan]:
    """The model's policy inference under ``settings`` (None when the node does not run it: ``policy.inference``
    disabled, or auto and the model has no C or no B). The model carries ``policy.len`` / ``policy.policies`` already
    (``model_source.node_model``). ValueError naming the parameter: ``policy.inference: enabled`` on a model without
    B, a setting that does not fit the model."""
    if settings.inference == "disabled":
        return None
    if model.B is None:
        if settings.inference == "enabled":
            raise ValueError("policy.inference: enabled needs the model's transitions B (a policy is a sequence of "
                             "controls) and the model has none; set policy.inference: disabled, or add B")
        return None
    if settings.inference == "auto" and model.C is None:
        return None
    steps = {"policies": model.policies} if model.policies is not None else {"policy_len": model.horizon}
    try:
        return plan_policies(model.A, model.A_dependencies, model.B, model.B_dependencies, model.C, model.E,
                             dtype=dtype, validate=False, **steps, **settings.plan_settings())
    except ValueError as exc:
        raise ValueError(f"policy.{exc}") from None


@dataclass(frozen=True)
class PolicyStep:
    """One agent's policy step: ``neg_efe`` (P,) (pymdp's neg_efe, its G), ``q_pi`` (P,), ``controls`` (F,) int64 (the
    chosen control of each factor), ``policy`` (the chosen policy's index; -1 in marginal mode), ``seconds`` (the
    policy call of the tick, all agents: beliefs in, noise, the kernel), ``fed_back`` (``policy.publish_controls``:
    the control is the agent's next control)."""

    neg_efe: np.ndarray
    q_pi: np.ndarray
    controls: np.ndarray
    policy: int
    seconds: float
    fed_back: bool


class PolicyStage:
    """``inference``: the model's policy inference for the node's b agents (``batch_size`` b, built and compiled by
    ``autotune.deployment.deploy_policy``); ``D``: the packed prior (S,) every agent's row starts from; ``seed``:
    ``policy.seed``; ``publish_controls``: ``policy.publish_controls``."""

    def __init__(self, inference: PolicyInference, D: np.ndarray, seed: int = 0, publish_controls: bool = False):
        if inference.batch_size is None:
            raise ValueError("inference: expected one built with batch_size (one row per agent)")
        plan = inference.plan
        self.inference = inference
        self.publish_controls = bool(publish_controls)
        self.seed = int(seed)
        self._beliefs = np.tile(np.asarray(D, plan.dtype), (inference.batch_size, 1))
        self._noise = inference.noise_stream(self.seed) if plan.stochastic else None
        #: the policies (P, T, F) and their flattened list, as every message carries them
        self.policies = plan.policies
        self.policies_flat: list[int] = plan.policies.ravel().tolist()
        #: calls since construction or :meth:`reset`: the step of ``policy.seed``'s stream the next call samples
        self.calls = 0

    @property
    def plan(self) -> PolicyPlan:
        return self.inference.plan

    def run(self, beliefs: Mapping[int, np.ndarray]) -> dict[int, PolicyStep]:
        """Each stepping agent's policy step from its beliefs (S,) (``beliefs[k]``, agent k's row), in one call."""
        t0 = time.perf_counter()
        rows = self._beliefs
        for k, q in beliefs.items():
            rows[k] = q
        noise = self._noise.next() if self._noise is not None else None
        result = self.inference(rows, noise)
        seconds = time.perf_counter() - t0
        self.calls += 1
        return {k: PolicyStep(result.neg_efe[k], result.q_pi[k], result.action[k], int(result.policy[k]), seconds,
                              self.publish_controls) for k in beliefs}

    def reset(self) -> None:
        """Back to step 0 of ``policy.seed``'s stream (the node's ``~/reset``, a jump of the clock)."""
        self.calls = 0
        if self._noise is not None:
            self._noise.reset()
