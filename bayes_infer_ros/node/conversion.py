"""Message fields <-> arrays (numpy only, no rclpy): an observation's fields to a checked distribution, stamps,
and the packed beliefs to per-factor payloads with their summaries. Tested in test/node/test_conversion.py.

Shapes: ``m`` = levels of one modality, ``F`` = factors.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from bayes_infer_ros.inference.belief_filter import no_evidence as _no_evidence

# Every reason an input can be refused for; each has a counter in /diagnostics ("rejected.<reason>").
REJECT_REASONS = (
    "wrong_length",        # probabilities has the wrong number of entries for the modality
    "non_finite",          # NaN or inf in probabilities
    "negative",            # a negative probability
    "all_zero",            # probabilities sum to 0: no distribution
    "level_out_of_range",  # level < -1 or level >= m
    "out_of_order",        # header stamp older than the last accepted one of the same topic
    "stale",               # older than observation_timeout when it arrived
    "future",              # stamped more than max_future_stamp ahead of the node clock (admission.py)
    "bad_stamp",           # negative sec or nanosec >= 10^9: not a time (admission.py)
    "bad_control",         # Controls message with the wrong length, an index out of range or a wrong label
    "unknown_label",       # CategoricalObservation.label is not a level of the modality
    "label_mismatch",      # a label, and a level that is neither 0 (unset) nor the label's index
    "missing_field",       # sensor adapter: the path does not resolve (a field, an entry), or key_field's entries
                           # do not pair up with field's
    "no_match",            # sensor adapter: no entry has the key (and no empty_value), or several without a reduction
    "out_of_limits",       # sensor adapter: REP 117, a range outside the sensor's limits, a scan sector without a
                           # usable beam
    "out_of_bins",         # sensor adapter: a number outside every bin
    "unknown_value",       # sensor adapter: a value (string, enum, boolean) that no level lists
    "overflow",            # sensor adapter: finite values whose reduction is not (a norm's squares, a mean's sum)
    "bad_geometry",        # sensor adapter: a LaserScan whose angle_increment is not > 0 or whose angles are absurd
    "too_large",           # sensor adapter: a sequence read entry by entry past adapters.MAX_ENTRIES entries
)

# Probabilities whose sum is off by more than this are renormalised *and* counted ("renormalized").
RENORMALIZE_ATOL = 1e-3


@dataclass(frozen=True)
class ObservationCheck:
    """Outcome of :func:`observation_to_distribution`: ``distribution`` (m,) float32, or a ``reason``."""

    distribution: Optional[np.ndarray]
    reason: Optional[str] = None
    detail: str = ""
    renormalized: bool = False

    @property
    def ok(self) -> bool:
        return self.distribution is not None


def one_hot(level: int, num_levels: int) -> np.ndarray:
    out = np.zeros(num_levels, dtype=np.float32)
    out[level] = 1.0
    return out


def no_evidence(num_levels: int) -> np.ndarray:
    """The observation (m,) float32 of a modality with nothing new: all zero, which adds nothing to pymdp's
    likelihood ``xlogy(o, A)`` (a uniform vector would: it is evidence)."""
    return _no_evidence(num_levels, np.float32)


def label_level(label: str, level: int, labels: Sequence[str]) -> tuple[int, Optional[str], str]:
    """(level, reason, detail) of a CategoricalObservation's ``label`` and ``level``. An empty label leaves
    ``level`` as it is. A label gives the level by name; ``level`` must then be left at its default 0 or name the
    same level (a message that sets both names one level), else ``label_mismatch``; a label that is not a level of
    the modality is ``unknown_label``."""
    if not label:
        return int(level), None, ""
    if label not in labels:
        return -1, "unknown_label", f"label {label!r} is not a level of the modality ({list(labels)})"
    index = list(labels).index(label)
    if int(level) not in (0, index):
        return -1, "label_mismatch", (f"label {label!r} is level {index} but level is {int(level)} (leave level 0 "
                                      "when giving a label)")
    return index, None, ""


def observation_to_distribution(level: int, probabilities: Sequence[float], num_levels: int, label: str = "",
                                labels: Sequence[str] = ()) -> ObservationCheck:
    """A CategoricalObservation's fields -> a distribution over the modality's ``num_levels`` levels.

    A non-empty ``label`` gives the level by name (``labels``: the modality's; :func:`label_level`).
    ``level >= 0`` is a one-hot observation (``probabilities`` is then ignored); ``level == -1`` uses
    ``probabilities``, which must have ``num_levels`` finite, non-negative entries with a positive sum;
    a sum off 1 by more than RENORMALIZE_ATOL is renormalised and flagged. Never raises.
    """
    level, reason, detail = label_level(label, level, labels)
    if reason is not None:
        return ObservationCheck(None, reason, detail)
    if level >= 0:
        if level >= num_levels:
            return ObservationCheck(None, "level_out_of_range", f"level {level} but the modality has {num_levels} levels (0..{num_levels - 1})")
        return ObservationCheck(one_hot(level, num_levels))
    if level != -1:
        return ObservationCheck(None, "level_out_of_range", f"level {level}: expected 0..{num_levels - 1}, or -1 to use probabilities")
    p = np.asarray(probabilities, dtype=np.float64).ravel()
    if p.size != num_levels:
        return ObservationCheck(None, "wrong_length", f"probabilities has {p.size} entries, the modality has {num_levels} levels")
    if not np.all(np.isfinite(p)):
        return ObservationCheck(None, "non_finite", f"probabilities contain NaN/inf at index {int(np.argmin(np.isfinite(p)))}")
    if np.any(p < 0):
        i = int(np.argmax(p < 0))
        return ObservationCheck(None, "negative", f"probabilities[{i}] = {p[i]:g} < 0")
    total = float(p.sum())
    if not total > 0.0:
        return ObservationCheck(None, "all_zero", "probabilities sum to 0")
    renormalized = abs(total - 1.0) > RENORMALIZE_ATOL
    return ObservationCheck((p / total).astype(np.float32), renormalized=renormalized,
                            detail=f"probabilities sum to {total:g}; renormalised" if renormalized else "")


def stamp_to_ns(sec: int, nanosec: int) -> int:
    return int(sec) * 1_000_000_000 + int(nanosec)


def belief_summary(probabilities: np.ndarray) -> tuple[int, float]:
    """(index of the most likely state, the first one on a tie; Shannon entropy in nats) of one belief."""
    p = np.asarray(probabilities, dtype=np.float64)
    nz = p[p > 0]
    return int(np.argmax(p)), float(-np.sum(nz * np.log(nz)))


def beliefs_from_packed(packed: np.ndarray, state_offsets: Sequence[int]) -> list[np.ndarray]:
    """(sum n_f,) -> F float32 arrays (the Belief.probabilities payloads)."""
    packed = np.asarray(packed, dtype=np.float32)
    return [packed[state_offsets[f]:state_offsets[f + 1]] for f in range(len(state_offsets) - 1)]
