"""Generative models in pymdp's array conventions: structure, validation, I/O."""
from .generative_model import GenerativeModel, ModelStructure, as_deps, trivial_B_dependencies
from .io import (
    flatten_parameters,
    load_model,
    load_npz,
    model_from_parameters,
    model_to_parameters,
    read_parameters_yaml,
    save_model,
    save_npz,
    save_parameters_yaml,
)
from .validation import ModelValidationError, validate_model

__all__ = [
    "GenerativeModel", "ModelStructure", "ModelValidationError", "as_deps", "trivial_B_dependencies",
    "flatten_parameters", "load_model", "load_npz", "model_from_parameters", "model_to_parameters",
    "read_parameters_yaml", "save_model", "save_npz", "save_parameters_yaml", "validate_model",
]
