"""The messages the node publishes for a tick: one ``Beliefs`` and the ``Belief`` of each factor in it."""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from ..node import admission
from ..node import conversion as conv
from ..autotune.deployment import Deployment
from ..node.tick_loop import TickEvidence, TickLoop, TickOutput
from bayes_infer_ros.msg import Belief, Beliefs  # noqa: E402 (after ros/__init__ path fix)


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
