"""The node's model, from its settings (no rclpy): a model file, or the inline ``model.*`` parameters; either way with
the node's ``policy.len`` and ``policy.policies`` where given (they are read with the model: ``model.E`` has one
entry per policy)."""
from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, Callable

from ..model import GenerativeModel, load_model, model_from_parameters
from ..model.validation import ModelValidationError
from .parameters import allowed_model_keys
from .settings import NodeSettings

MODEL_HINT = "`bayes-infer model validate FILE` checks a model file; fix it, then configure again"
# The model's policy fields as the node's parameters name them (``model.validation`` names the fields).
_POLICY_KEYS = ((re.compile(r"^E$"), "model.E"), (re.compile(r"^policies"), "policy.policies"),
                (re.compile(r"^policy_len$"), "policy.len"), (re.compile(r"^C\[\d+\] \((\w+)\)$"), r"model.C.\1"))


def node_model(settings: NodeSettings, log: Any, count: Callable[..., None]) -> GenerativeModel:
    """The model ``settings`` name: ``model_file`` when set (its inline ``model.*`` values are ignored, with a
    warning), else the ``model.*`` parameters, whose keys the loader does not read are warned about and counted
    (``unknown_parameters``); ``policy.len`` / ``policy.policies`` replace the model's own where given. RuntimeError
    with the reason (a policy field named as its parameter) and what to do about it when it is refused."""
    inline = dict(settings.model)
    policy = settings.policy.model_parameters()
    try:
        if settings.model_file:
            if inline:
                log.warning(f"model_file is set: ignoring {len(inline)} inline model.* parameters")
            model = with_policies(load_model(os.path.expanduser(settings.model_file)), policy)
            log.info(f"model loaded from {settings.model_file}")
            return model
        if not inline:
            raise ValueError("no model: set model_file or the model.* parameters (see config/agent.yaml)")
        model = model_from_parameters(inline | policy)
    except Exception as exc:  # noqa: BLE001 - the reason, and what to do about it
        raise RuntimeError(f"{node_key_error(exc)} ({MODEL_HINT})") from exc
    allowed = allowed_model_keys([model.factor_name(f) for f in range(model.num_factors)],
                                 [model.modality_name(i) for i in range(model.num_modalities)])
    for name in sorted(set(inline) - allowed):
        log.warning(f"unknown model parameter '{name}' ignored (no such modality/factor field)")
        count("unknown_parameters")
    return model


def with_policies(model: GenerativeModel, policy: dict[str, Any]) -> GenerativeModel:
    """``model`` with the node's ``policy.len`` / ``policy.policies`` (``PolicySettings.model_parameters``) in place
    of its own, validated (its E must fit them); the model itself when neither is given."""
    if not policy:
        return model
    steps = int(policy.get("policy.len") or model.horizon)
    flat = policy.get("policy.policies")
    policies = None
    if flat is not None:
        F = model.num_factors
        if len(flat) % (steps * F):
            raise ModelValidationError("policy.policies", f"has {len(flat)} values: expected a multiple of steps x "
                                                          f"factors = {steps} x {F} (policies flattened as (P, "
                                                          f"{steps}, {F}))")
        policies = [flat[i:i + steps * F] for i in range(0, len(flat), steps * F)]
        policies = [[p[t * F:(t + 1) * F] for t in range(steps)] for p in policies]
    elif model.policies is not None and "policy.len" in policy and steps != model.horizon:
        raise ModelValidationError("policy.len", f"{steps} steps, but the model file lists its policies of "
                                                 f"{model.horizon} step(s); give policy.policies as well, or leave "
                                                 f"policy.len at 0")
    changed = dataclasses.replace(model, policy_len=steps if "policy.len" in policy else model.policy_len,
                                  policies=policies if flat is not None else model.policies)
    return changed.validate()


def node_key_error(exc: BaseException) -> str:
    """``exc``'s text, a model's policy field named as the node's parameter (``E`` -> ``model.E``, ``policies`` ->
    ``policy.policies``, ``policy_len`` -> ``policy.len``, ``C[i] (name)`` -> ``model.C.name``)."""
    if isinstance(exc, ModelValidationError):
        for pattern, key in _POLICY_KEYS:
            if pattern.search(exc.field):
                return f"{pattern.sub(key, exc.field, count=1)}: {exc.reason}"
    return str(exc)
