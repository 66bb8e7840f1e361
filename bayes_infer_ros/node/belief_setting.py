"""``~/set_beliefs`` without ROS: a request (factors, each a level or a distribution) checked against the model into
the prior the agent's next step starts from (``BeliefFilter.set_prior``), or the reason it is refused, naming the
factor or level. As robot_localization's ``set_pose`` sets a pose: the next tick's prior, for the factors named, is
what was set; the factors not named keep the prior the tick would have used.

A request names ``factors`` (each once); ``levels`` (one per factor, or empty: every factor by distribution) gives a
level by label or decimal index, one-hot, or "" for a distribution; ``probabilities`` holds the distributions of the
factors whose level is "", concatenated in request order (n_f numbers each). A distribution must be finite,
non-negative and not all zero; it is renormalised to sum 1 (the answer says so when it did not).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

# A distribution whose sum is this far from 1 is said to be renormalised in the answer.
SUM_TOLERANCE = 1e-6


@dataclass(frozen=True)
class BeliefSetting:
    """What to set: ``prior`` (S,) float64 packed (every factor's slot; only ``factors``' are used), ``factors`` the
    indices set, ``summary`` what was set (the service's answer)."""

    prior: np.ndarray
    factors: tuple[int, ...]
    summary: str


def _level(text: str, labels: Sequence[str]) -> Optional[int]:
    """A level by label or decimal index (None: neither)."""
    if text in labels:
        return list(labels).index(text)
    if text.isdigit() and int(text) < len(labels):
        return int(text)
    return None


def parse_setting(factors: Sequence[str], levels: Sequence[str], probabilities: Sequence[float],
                  factor_names: Sequence[str],
                  state_labels: Sequence[Sequence[str]]) -> tuple[Optional[BeliefSetting], str]:
    """A request -> (the setting, "") or (None, the reason it is refused: naming the factor, level or value).
    ``factor_names`` and ``state_labels``: the model's (one label list per factor)."""
    names, levels = [str(f) for f in factors], [str(v) for v in levels]
    values = [float(p) for p in probabilities]
    if not names:
        return None, f"factors: name at least one factor (one of {list(factor_names)})"
    if levels and len(levels) != len(names):
        return None, (f"levels: {len(levels)} given for {len(names)} factors (one per factor: a level, or \"\" for a "
                      "distribution in probabilities; or none at all: every factor by distribution)")
    levels = levels or [""] * len(names)
    sizes = [len(labels) for labels in state_labels]
    offsets = np.cumsum([0, *sizes])
    prior = np.zeros(int(offsets[-1]), np.float64)
    chosen, parts, read = [], [], 0
    wanted = sum(sizes[list(factor_names).index(n)] for n, v in zip(names, levels) if v == "" and n in factor_names)
    for name, level in zip(names, levels):
        if name not in factor_names:
            return None, f"factor {name!r}: the model has no such factor (factors: {list(factor_names)})"
        f = list(factor_names).index(name)
        if f in chosen:
            return None, f"factor {name!r}: named twice"
        labels = [str(x) for x in state_labels[f]]
        lo, hi = int(offsets[f]), int(offsets[f + 1])
        if level:
            index = _level(level, labels)
            if index is None:
                return None, (f"factor {name!r}: level {level!r} is not one of its levels {labels} (or an index "
                              f"0..{len(labels) - 1})")
            prior[lo + index] = 1.0
            parts.append(f"{name}={labels[index]}")
        else:
            if len(values) != wanted:
                return None, (f"probabilities: {len(values)} numbers given; the factors set by distribution need "
                              f"{wanted} (their levels, in request order)")
            p = np.asarray(values[read:read + hi - lo], np.float64)
            read += hi - lo
            if not all(math.isfinite(x) and x >= 0.0 for x in p) or p.sum() <= 0.0:
                return None, (f"factor {name!r}: probabilities {p.tolist()} must be finite, non-negative and not all "
                              "zero")
            total = float(p.sum())
            prior[lo:hi] = p / total
            note = "" if abs(total - 1.0) <= SUM_TOLERANCE else f" (renormalised from a sum of {total:g})"
            parts.append(f"{name}={np.round(prior[lo:hi], 4).tolist()}{note}")
        chosen.append(f)
    if read != len(values):
        return None, (f"probabilities: {len(values)} numbers given, but no factor is set by distribution (a level "
                      "\"\" asks for one)")
    return BeliefSetting(prior, tuple(chosen), ", ".join(parts)), ""
