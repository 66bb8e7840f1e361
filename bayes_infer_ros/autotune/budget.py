"""The memory budget: one unit (bytes), one estimate, one check, for the node, the autotuner and the harness.

    budget = MemoryBudget.from_mib(2048, "memory_budget_mb")      # the node's parameter
    budget.check("hybrid_block", model)    # the estimate in bytes, or MemoryBudgetExceeded naming the parameter

The estimate is structure-only (``inference.peak_elements`` over ``size_estimates``): nothing is allocated, so a
layout too large to build is refused before it is built.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..inference import VariantUnsupported, peak_elements
from .features import size_estimates

#: Engines run in float32 unless asked otherwise.
ITEMSIZE = 4
MIB = 2**20
GIB = 2**30


class MemoryBudgetExceeded(VariantUnsupported):
    """A variant's estimated build memory is over the budget."""


def format_bytes(n: float) -> str:
    """``n`` bytes with a binary unit: 552 B, 1.5 KiB, 3.0 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover


def estimated_bytes(variant: str, model: Any, itemsize: int = ITEMSIZE, estimates: Optional[dict] = None) -> int:
    """Peak bytes ``variant``'s prepared arrays may take while built, from the structure of ``model`` (a
    GenerativeModel, a ModelStructure or a generator spec) alone; ``estimates``: its ``size_estimates``, when the
    caller has them."""
    est = estimates if estimates is not None else size_estimates(model)
    return int(peak_elements(variant, est) * itemsize)


@dataclass(frozen=True)
class MemoryBudget:
    """At most ``value`` ``unit`` ("B", "MiB" or "GiB") for one engine's prepared arrays, compared in bytes;
    ``name`` is how the user sets it (for messages)."""

    value: float
    unit: str = "B"
    name: str = "memory budget"

    @classmethod
    def from_mib(cls, mib: float, name: str = "memory budget") -> "MemoryBudget":
        return cls(float(mib), "MiB", name)

    @classmethod
    def from_gib(cls, gib: float, name: str = "memory budget") -> "MemoryBudget":
        return cls(float(gib), "GiB", name)

    @property
    def bytes(self) -> float:
        return self.value * {"B": 1, "MiB": MIB, "GiB": GIB}[self.unit]

    def describe(self) -> str:
        """``memory_budget_mb 2048 (2.0 GiB)``: the setting as the user wrote it, and its size."""
        return f"{self.name} {self.value:g} ({format_bytes(self.bytes)})"

    def fits(self, variant: str, model: Any, itemsize: int = ITEMSIZE, estimates: Optional[dict] = None) -> bool:
        return estimated_bytes(variant, model, itemsize, estimates) <= self.bytes

    def check(self, variant: str, model: Any, itemsize: int = ITEMSIZE, estimates: Optional[dict] = None) -> int:
        """The estimate in bytes; raises :class:`MemoryBudgetExceeded` (naming the setting) when it is over."""
        est = estimated_bytes(variant, model, itemsize, estimates)
        if est > self.bytes:
            base = estimated_bytes("baseline", model, itemsize, estimates)
            raise MemoryBudgetExceeded(
                f"variant {variant}: its arrays are estimated at {format_bytes(est)} while built, over "
                f"{self.describe()}; raise {self.name}, or pick a variant that stores less, e.g. baseline at "
                f"{format_bytes(base)}")
        return est

    def refusal(self, variant: str, model: Any, itemsize: int = ITEMSIZE, estimates: Optional[dict] = None) -> str:
        """Why ``variant`` is over this budget on ``model`` (:meth:`check`'s message), or "" when it fits."""
        try:
            self.check(variant, model, itemsize, estimates)
        except MemoryBudgetExceeded as exc:
            return str(exc)
        return ""
