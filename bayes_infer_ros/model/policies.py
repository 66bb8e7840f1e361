"""A model's policies as pymdp 1.0.4 enumerates them: every combination of each factor's controls at each step.

A policy is ``policy_len`` steps of one control per factor, an int array (P, T, F). pymdp's ``Agent`` builds them with
``control.construct_policies(num_states, num_controls, policy_len)`` from B's control axes: the last factor of the
last step varies fastest, and a factor with one control (no control drives it) always takes control 0. pymdp's
``control_fac_idx`` does not change the list (``Agent`` passes ``num_controls``, which decides it). A model may
also give its own list (pymdp's ``policies=``). Errors are :class:`ModelValidationError` naming the field.
"""
from __future__ import annotations

import itertools
import math
from typing import Any, Sequence

import numpy as np

from .validation import MAX_POLICIES, ModelValidationError, check_policies_array

__all__ = ["MAX_POLICIES", "check_policies", "construct_policies", "num_policies"]


def num_policies(num_controls: Sequence[int], policy_len: int) -> int:
    """prod_f u_f ** policy_len: how many policies :func:`construct_policies` enumerates."""
    return math.prod(int(u) for u in num_controls) ** int(policy_len)


def construct_policies(num_controls: Sequence[int], policy_len: int = 1, field: str = "policy_len") -> np.ndarray:
    """pymdp 1.0.4's policies for factors with ``num_controls`` controls -> (P, policy_len, F) int64, refused
    naming ``field`` when there would be more than :data:`MAX_POLICIES`."""
    num_controls = [int(u) for u in num_controls]
    if isinstance(policy_len, bool) or int(policy_len) != policy_len or int(policy_len) < 1:
        raise ModelValidationError(field, f"expected an integer >= 1 (steps per policy), got {policy_len!r}")
    policy_len = int(policy_len)
    if any(u < 1 for u in num_controls):
        raise ModelValidationError("num_controls", f"expected integers >= 1, got {num_controls}")
    count = num_policies(num_controls, policy_len)
    if count > MAX_POLICIES:
        raise ModelValidationError(field, f"{policy_len} steps of the controls {num_controls} make {count:.3g} "
                                          f"policies, more than the limit of {MAX_POLICIES}")
    F = len(num_controls)
    flat = np.array(list(itertools.product(*[range(u) for u in num_controls * policy_len])), np.int64)
    return flat.reshape(count, policy_len, F)


def check_policies(policies: Any, num_controls: Sequence[int], field: str = "policies") -> np.ndarray:
    """A given list of policies as (P, T, F) int64 (C order), refused naming ``field`` (and the entry): its shape,
    a value that is not an integer, a control outside [0, u_f)."""
    return check_policies_array(field, policies, num_controls)
