"""What an optimizer declares: how large its update direction is, and where it applies.

An optimizer's step is ``ΔW = -η (A + λ W)``. A declaration gives the RMS→RMS operator
norm ``‖A‖_R`` as an expression in ``n_in``, ``n_out``, ``L`` and ``G = ‖∇W‖_2``; the
engine supplies the scale of each symbol per role and derives everything else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import sympy as sp

from .errors import SpecError
from .symbols import SYMBOLS

__all__ = ["OptimizerSpec", "AppliesTo", "show"]

AppliesTo = Literal["all", "matrices"]
_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789-_+.")


def show(expr: sp.Expr | None) -> str:
    """A declared expression as a user would write it: ``max``/``min`` in lower case."""
    return str(expr).replace("Max(", "max(").replace("Min(", "min(")


@dataclass(frozen=True)
class OptimizerSpec:
    """A frozen optimizer declaration.

    Attributes:
        name: catalog key, lower case (``"adamw"``).
        update_norm: ``‖A‖_R`` in ``n_in, n_out, L, G``.
        eps: scale of the optimizer's ε in the same symbols, or ``None`` if it has none.
        applies_to: ``"all"`` (weights and biases) or ``"matrices"`` (no bias rows; in
            practice such an optimizer's biases go to AdamW).
        eps_label: how tables name the ε row (``"AdamW ε"``).
        summary: one line: the update rule this declaration idealises.
        paper: where the paper derives it.
    """

    name: str
    update_norm: sp.Expr
    eps: sp.Expr | None = None
    applies_to: AppliesTo = "all"
    eps_label: str = "ε"
    summary: str = ""
    paper: str = ""
    doc: str = field(default="", compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.name or not set(self.name) <= _NAME_CHARS or len(self.name) > 64:
            raise SpecError(
                f"name: {self.name!r} must be 1-64 characters of a-z, 0-9, '-', '_', '+', '.'"
            )
        if self.applies_to not in ("all", "matrices"):
            raise SpecError(f"applies_to: {self.applies_to!r} must be 'all' or 'matrices'")
        for fname in ("update_norm", "eps"):
            expr = getattr(self, fname)
            if expr is None:
                continue
            if not isinstance(expr, sp.Expr):
                raise SpecError(f"{fname}: expected a sympy expression, got {type(expr).__name__}")
            extra = expr.free_symbols - set(SYMBOLS.values())
            if extra:
                names = ", ".join(sorted(str(s) for s in extra))
                raise SpecError(f"{fname}: unknown symbols {names}; use {', '.join(SYMBOLS)}")
            if expr.is_positive is False or expr.is_zero:
                raise SpecError(f"{fname}: {expr} is not positive; an update must have a size")

    @property
    def has_eps(self) -> bool:
        return self.eps is not None

    @property
    def applies_to_biases(self) -> bool:
        return self.applies_to == "all"
