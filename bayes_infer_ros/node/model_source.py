"""The node's model, from its settings (no rclpy): a model file, or the inline ``model.*`` parameters."""
from __future__ import annotations

import os
from typing import Any, Callable

from ..model import GenerativeModel, load_model, model_from_parameters
from .parameters import allowed_model_keys
from .settings import NodeSettings

MODEL_HINT = "`bayes-infer model validate FILE` checks a model file; fix it, then configure again"


def node_model(settings: NodeSettings, log: Any, count: Callable[..., None]) -> GenerativeModel:
    """The model ``settings`` name: ``model_file`` when set (its inline ``model.*`` values are ignored, with a
    warning), else the ``model.*`` parameters, whose keys the loader does not read are warned about and counted
    (``unknown_parameters``). RuntimeError with the reason and what to do about it when it is refused."""
    inline = dict(settings.model)
    try:
        if settings.model_file:
            if inline:
                log.warning(f"model_file is set: ignoring {len(inline)} inline model.* parameters")
            model = load_model(os.path.expanduser(settings.model_file))
            log.info(f"model loaded from {settings.model_file}")
            return model
        if not inline:
            raise ValueError("no model: set model_file or the model.* parameters (see config/agent.yaml)")
        model = model_from_parameters(inline)
    except Exception as exc:  # noqa: BLE001 - the reason, and what to do about it
        raise RuntimeError(f"{exc} ({MODEL_HINT})") from exc
    allowed = allowed_model_keys([model.factor_name(f) for f in range(model.num_factors)],
                                 [model.modality_name(i) for i in range(model.num_modalities)])
    for name in sorted(set(inline) - allowed):
        log.warning(f"unknown model parameter '{name}' ignored (no such modality/factor field)")
        count("unknown_parameters")
    return model
