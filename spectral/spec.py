"""What an optimizer declares: how large its update direction is, and where it applies.

An optimizer's step is ``ΔW = -η (A + λ W)``. A declaration gives the RMS→RMS operator
norm ``‖A‖_R`` as an expression in ``n_in``, ``n_out``, ``L`` and ``G = ‖∇W‖_2``; the
engine supplies the scale of each symbol per role and derives everything else.
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass, field
from typing import Literal

import sympy as sp

from .errors import SpecError
from .symbols import SYMBOLS

__all__ = ["OptimizerSpec", "AppliesTo", "show"]

AppliesTo = Literal["all", "matrices"]
_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789-_+.")
MAX_EPS_INDEX = 15
"""Largest ``eps_index``: no optimizer reads a longer ε tuple (torch's Adafactor has 2)."""


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
        eps_key: the param-group key the implementation reads ε from (``"eps"``;
            ``"matrix_eps"`` for pytorch-optimizer's Shampoo).
        eps_index: ``None`` when that key holds one float; otherwise the position of ε in
            the tuple it holds (``0`` for ``torch.optim.Adafactor``'s ``eps=(eps1, eps2)``).
        summary: one line: the update rule this declaration idealises.
        paper: where the paper derives it.
    """

    name: str
    update_norm: sp.Expr
    eps: sp.Expr | None = None
    applies_to: AppliesTo = "all"
    eps_label: str = "ε"
    eps_key: str = "eps"
    eps_index: int | None = None
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
        self._check_eps_place()

    def _check_eps_place(self) -> None:
        """``eps_key``/``eps_index`` end up in generated code, so only plain names and
        small indices; and they place an ε, so they need one declared."""
        key, index = self.eps_key, self.eps_index
        if isinstance(key, str) and len(key) > 64:
            raise SpecError(f"eps_key: {len(key)} characters (at most 64)")
        if (
            not isinstance(key, str)
            or not (key.isascii() and key.isidentifier())
            or keyword.iskeyword(key)
        ):
            raise SpecError(
                f"eps_key: {key!r} must be a Python identifier (a-z, A-Z, 0-9, '_', not "
                "starting with a digit, not a keyword) of at most 64 characters"
            )
        if index is not None and (
            isinstance(index, bool) or not isinstance(index, int) or not 0 <= index <= MAX_EPS_INDEX
        ):
            raise SpecError(
                f"eps_index: {index!r} must be an integer from 0 to {MAX_EPS_INDEX} "
                "(or absent for a float ε)"
            )
        if self.eps is None:
            for fname, unset in (("eps_key", "eps"), ("eps_index", None)):
                if getattr(self, fname) != unset:
                    raise SpecError(
                        f"{fname}: only meaningful when eps is declared; declare eps or drop {fname}"
                    )

    @property
    def has_eps(self) -> bool:
        return self.eps is not None

    @property
    def applies_to_biases(self) -> bool:
        return self.applies_to == "all"
