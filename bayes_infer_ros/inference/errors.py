"""Errors of the inference core that every layer below the registry can raise."""
from __future__ import annotations


class VariantUnsupported(ValueError):
    """A variant cannot run this model (e.g. its prepared arrays exceed the memory budget)."""
