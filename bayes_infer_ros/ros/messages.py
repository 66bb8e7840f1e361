"""The messages the node publishes for a tick: one ``Beliefs`` and the ``Belief`` of each factor in it, and with policy
inference on, one ``Policy``."""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import numpy as np

from ..node import admission
from ..node import conversion as conv
from ..autotune.deployment import Deployment
from ..node.policy_stage import PolicyStage, PolicyStep
from ..node.tick_loop import TickEvidence, TickLoop, TickOutput
from bayes_infer_ros.msg import Belief, Beliefs, Policy  # noqa: E402 (after ros/__init__ path fix)


def beliefs_message(posterior: np.ndarray, state_offsets: Sequence[int], factor_names: Sequence[str],
                    state_labels: Sequence[Sequence[str]], stamp_ns: int, tick: int, algorithm: str, variant: str,
                    inference_s: float, device: str = "", evidence: Optional[TickEvidence] = None,
                    modality_names: Sequence[str] = ()) -> Beliefs:
    """``posterior`` (S,) packed; ``state_labels`` must be strings (model/limits.py makes sure): the generated
    message code aborts the process on anything else. The stamp is clamped into ``builtin_interfaces/Time``.
    ``evidence``: the step's free energy, each of ``modality_names``' surprise and outliers (None: free energy NaN,
    no surprise)."""
    msg = Beliefs()
    msg.header.stamp.sec, msg.header.stamp.nanosec = admission.output_stamp(stamp_ns)
    msg.tick, msg.algorithm, msg.variant, msg.device = tick, algorithm, variant, device
    msg.inference_ms = float(inference_s * 1e3)
    factors = []
    for f, probs in enumerate(conv.beliefs_from_packed(posterior, state_offsets)):
        b = Belief()
        b.header, b.name = msg.header, factor_names[f]
        b.state_labels = list(state_labels[f])
        b.probabilities = probs.tolist()
        b.most_likely_index, b.entropy = conv.belief_summary(probs)
        b.most_likely_label = state_labels[f][b.most_likely_index]
        factors.append(b)
    msg.factors = factors
    if evidence is None:
        msg.free_energy = math.nan
    else:
        msg.free_energy = evidence.free_energy
        msg.modalities = list(modality_names)
        msg.surprise = evidence.surprise.tolist()
        msg.outliers = evidence.outliers.tolist()
    return msg


def tick_message(loop: TickLoop, k: int, out: TickOutput, slot: Deployment) -> Beliefs:
    """The ``Beliefs`` of agent ``k``'s step ``out`` of ``loop``, run by the engine of the deployment ``slot``."""
    return beliefs_message(out.posterior, loop.filter.engine.layout.state_offsets, loop.factor_names,
                           loop.state_labels, out.stamp_ns, loop.ticks[k], slot.config.algorithm, slot.variant,
                           out.inference_s, slot.device, out.evidence, loop.modality_names)


def policy_message(header: Any, tick: int, step: PolicyStep, stage: PolicyStage, factor_names: Sequence[str],
                   control_names: Sequence[Sequence[str]], inference_s: float) -> Policy:
    """One agent's ``Policy`` of a tick: ``header`` that of the tick's Beliefs, ``step`` its policy step, ``stage`` the
    node's policy inference (the policies, the settings), ``control_names`` each factor's control labels."""
    msg = Policy()
    msg.header, msg.tick, msg.factors = header, tick, list(factor_names)
    msg.policies_shape = [int(x) for x in stage.policies.shape]
    msg.policies = stage.policies_flat
    msg.neg_efe, msg.q_pi = step.neg_efe.tolist(), step.q_pi.tolist()
    msg.policy = step.policy
    controls = step.controls.tolist()
    msg.controls = controls
    msg.control_labels = [names[u] for names, u in zip(control_names, controls)]
    msg.selection, msg.sampling_mode = stage.plan.selection, stage.plan.sampling_mode
    msg.fed_back = step.fed_back
    msg.inference_ms, msg.policy_ms = float(inference_s * 1e3), float(step.seconds * 1e3)
    return msg


def tick_policy_message(loop: TickLoop, k: int, out: TickOutput, beliefs: Beliefs) -> Optional[Policy]:
    """The ``Policy`` of agent ``k``'s step ``out`` of ``loop`` beside its ``beliefs`` (None without policy
    inference)."""
    if out.policy is None or loop.policy is None:
        return None
    return policy_message(beliefs.header, beliefs.tick, out.policy, loop.policy, loop.factor_names,
                          loop.control_names, out.inference_s)
