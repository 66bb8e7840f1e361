"""The inference algorithms as records: what every layer needs to know of FPI, VMP and MMP, said once.

An engine carries its record (``engine.spec``); code that branches on the algorithm reads a field of it instead of
comparing names, so a new algorithm is one record here plus its maths (``algorithms.py``) and kernels. Pure Python.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Algorithm:
    """One inference algorithm (pymdp 1.0.4's name and conventions).

    name:     "fpi" | "vmp" | "mmp"
    window:   its calls take a window of T steps with the actions between them (obs ([b,] T, O), posteriors
              ([b,] T, S)) and need B; False: one step (obs ([b,] O), posteriors ([b,] S))
    ticks:    it has the node's one-step tick (the engine's ``step``)
    kind_vmp: a window's messages are VMP's (its transitions read as log B); False for MMP (B) and FPI
    """

    name: str
    window: bool
    ticks: bool
    kind_vmp: bool = False

    def __str__(self) -> str:
        return self.name


FPI = Algorithm("fpi", window=False, ticks=True)
VMP = Algorithm("vmp", window=True, ticks=False, kind_vmp=True)
MMP = Algorithm("mmp", window=True, ticks=False)

#: Every algorithm by name, in pymdp's order.
ALGORITHM_SPECS: dict[str, Algorithm] = {a.name: a for a in (FPI, VMP, MMP)}
#: Their names (what the node's ``algorithm`` parameter and ``build_inference`` accept).
ALGORITHMS: tuple[str, ...] = tuple(ALGORITHM_SPECS)


def algorithm_spec(name: str) -> Algorithm:
    """The record of algorithm ``name``; ValueError naming the field and the names expected."""
    try:
        return ALGORITHM_SPECS[name]
    except (KeyError, TypeError):
        raise ValueError(f"algorithm: unknown {name!r}; expected one of {list(ALGORITHMS)}") from None
