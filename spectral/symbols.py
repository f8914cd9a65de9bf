"""The symbols an optimizer declaration may use, declared once, positive.

Without ``positive=True`` sympy keeps ``sqrt(n_in**2)`` as ``Abs(n_in)``.
"""

from __future__ import annotations

import sympy as sp

__all__ = ["n_in", "n_out", "L", "G", "SYMBOLS"]

n_in = sp.Symbol("n_in", positive=True)
"""Fan-in of the parameter (``1`` for a bias, ``d_0 = Θ(1)`` for the input layer)."""
n_out = sp.Symbol("n_out", positive=True)
"""Fan-out of the parameter (``d_{L+1} = Θ(1)`` for the output layer)."""
L = sp.Symbol("L", positive=True)
"""Number of residual blocks."""
G = sp.Symbol("G", positive=True)
"""Spectral norm ``‖∇W‖_2`` of the raw gradient; the engine derives its scale per role."""

SYMBOLS: dict[str, sp.Symbol] = {"n_in": n_in, "n_out": n_out, "L": L, "G": G}
"""Name → symbol, the whole vocabulary of a declaration."""
