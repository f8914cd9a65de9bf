"""What an optimizer declares: how large its update direction is, and where it applies.

An optimizer's step is ``ΔW = -η (A + λ W)``. A declaration gives the RMS→RMS operator
norm ``‖A‖_R`` as an expression in ``n_in``, ``n_out``, ``L`` and ``G = ‖∇W‖_2``; the
engine supplies the scale of each symbol per role and derives everything else.
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

import sympy as sp

from .errors import SpecError
from .symbols import SYMBOLS

__all__ = ["OptimizerSpec", "AppliesTo", "Implementation", "Law", "show"]

Implementation = tuple[
    str, tuple[tuple[str, Any], ...], tuple[tuple[str, Any], ...], float | None
]
"""(dotted class path, constructor kwargs, param-group keys, default ε): see OptimizerSpec."""

AppliesTo = Literal["all", "matrices"]
_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789-_+.")
MAX_EPS_INDEX = 15
"""Largest ``eps_index``: no optimizer reads a longer ε tuple (torch's Adafactor has 2)."""


def _monomial_positive(expr: sp.Basic) -> bool:
    """True when ``expr`` is a product of rational powers of positive symbols and positive
    rationals (``G / sqrt(n_in n_out)``): positive, read off its tree. Most declarations are
    such monomials; sympy's own query (``is_positive``, ``is_zero``) asks its facts in an
    order that changes with the string hash seed, and in some orders builds a sum and so
    imports sympy.tensor (about 50 ms of ``spectral derive``)."""
    if expr.is_Rational:
        return bool(expr.p > 0)
    if expr.is_Symbol:
        return expr.is_positive is True
    if expr.is_Mul:
        return all(_monomial_positive(a) for a in expr.args)
    if expr.is_Pow:
        return expr.exp.is_Rational and _monomial_positive(expr.base)
    return False


@lru_cache(maxsize=1024)
def show(expr: sp.Expr | None) -> str:
    """A declared expression as a user would write it: ``max``/``min`` in lower case.

    Cached: a derivation quotes its declaration in every role's reasons, and sympy's printer
    is slow."""
    return str(expr).replace("Max(", "max(").replace("Min(", "min(")


MAX_LAW_EXPONENT = 4
"""Largest ``|exponent|`` a horizon or batch law may declare."""
MAX_SOURCE = 200
"""Characters a law's ``source`` may have."""


@dataclass(frozen=True)
class Law:
    """How one hyperparameter moves along the horizon or the batch: ``x ∝ (X/X₀)^exponent``.

    Attributes:
        exponent: exact (a sympy ``Rational``): ``-8/25`` for ``η ∝ (D/D₀)^-0.32``.
        source: where the law comes from (a paper and its arXiv number).
        assumed: ``True`` where the law is carried over from another optimizer or setting
            rather than derived or measured for this one.
    """

    exponent: sp.Rational
    source: str
    assumed: bool = False

    def __post_init__(self) -> None:
        e = self.exponent
        if isinstance(e, int) and not isinstance(e, bool):
            object.__setattr__(self, "exponent", sp.Integer(e))
            e = self.exponent
        if not isinstance(e, sp.Rational) or abs(e) > MAX_LAW_EXPONENT:
            raise SpecError(
                f"law exponent: {e!r} must be an exact rational (sympy Rational) of size at "
                f"most {MAX_LAW_EXPONENT}"
            )
        if not isinstance(self.source, str) or not self.source.strip():
            raise SpecError("law source: say where the law comes from (a paper, a measurement)")
        if len(self.source) > MAX_SOURCE:
            raise SpecError(f"law source: {len(self.source)} characters (at most {MAX_SOURCE})")


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
        implementation: the torch class this declaration was measured on (``spectral
            infer`` records it): ``(dotted class path, constructor kwargs, param-group
            keys, default ε or None)``, kwargs and keys as sorted ``(name, value)`` pairs.
            ``spectral codegen`` builds it with no ``factories=``.
        lr_horizon: how lr moves with the token horizon D at a fixed batch
            (``η ∝ (D/D₀)^e``); ``None`` takes the default of :mod:`spectral.engine.axes`.
        lr_batch: how lr moves with the batch B at a fixed horizon; ``None``: the default
            for the update's degree in the gradient (:mod:`spectral.engine.axes`).
        eps_batch: how ε moves with B (``None``: held).
        momentum_batch: how ``1 - β`` of every momentum moves with B (``None``: held).
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
    implementation: Implementation | None = None
    lr_horizon: Law | None = None
    lr_batch: Law | None = None
    eps_batch: Law | None = None
    momentum_batch: Law | None = None

    def __post_init__(self) -> None:
        if not self.name or not set(self.name) <= _NAME_CHARS or len(self.name) > 64:
            raise SpecError(
                f"name: {self.name!r} must be 1-64 characters of a-z, 0-9, '-', '_', '+', '.'"
            )
        if self.applies_to not in ("all", "matrices"):
            raise SpecError(
                f"applies_to: {self.applies_to!r} must be 'all' or 'matrices'"
            )
        for fname in ("update_norm", "eps"):
            expr = getattr(self, fname)
            if expr is None:
                continue
            if not isinstance(expr, sp.Expr):
                raise SpecError(
                    f"{fname}: expected a sympy expression, got {type(expr).__name__}"
                )
            extra = expr.free_symbols - set(SYMBOLS.values())
            if extra:
                names = ", ".join(sorted(str(s) for s in extra))
                raise SpecError(
                    f"{fname}: unknown symbols {names}; use {', '.join(SYMBOLS)}"
                )
            if not _monomial_positive(expr) and (expr.is_positive is False or expr.is_zero):
                raise SpecError(
                    f"{fname}: {expr} is not positive; an update must have a size"
                )
        self._check_eps_place()
        for fname in ("lr_horizon", "lr_batch", "eps_batch", "momentum_batch"):
            law = getattr(self, fname)
            if law is not None and not isinstance(law, Law):
                raise SpecError(f"{fname}: expected a Law, got {type(law).__name__}")
        if self.eps_batch is not None and self.eps is None:
            raise SpecError("eps_batch: only meaningful when eps is declared")
        if self.implementation is not None:
            _check_implementation(self.implementation)

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
            isinstance(index, bool)
            or not isinstance(index, int)
            or not 0 <= index <= MAX_EPS_INDEX
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


_MAX_IMPLEMENTATION_ITEMS = 32


def _check_implementation(impl: object) -> None:
    """A recorded implementation is data that ends up in generated code: a dotted path of
    identifiers, a few keyword arguments of plain values, a finite ε."""
    if not (isinstance(impl, tuple) and len(impl) == 4):
        raise SpecError(
            "implementation: expected (class path, kwargs, group keys, default eps)"
        )
    path, kwargs, group, eps = impl
    parts = path.split(".") if isinstance(path, str) else []
    if (
        len(parts) < 2
        or not all(
            p.isascii() and p.isidentifier() and not keyword.iskeyword(p) for p in parts
        )
        or len(path) > 200
    ):
        raise SpecError(
            f"implementation: class {path!r} must be a dotted path (module.Class)"
        )
    for what, pairs in (("kwargs", kwargs), ("group", group)):
        if not isinstance(pairs, tuple) or len(pairs) > _MAX_IMPLEMENTATION_ITEMS:
            raise SpecError(
                f"implementation: {what} must be at most 32 (name, value) pairs"
            )
        for pair in pairs:
            if not (
                isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)
            ):
                raise SpecError(f"implementation: {what} must be (name, value) pairs")
            name, value = pair
            if not (name.isascii() and name.isidentifier()) or keyword.iskeyword(name):
                raise SpecError(
                    f"implementation: {what} key {name!r} is not a Python name"
                )
            if not _plain(value):
                raise SpecError(
                    f"implementation: {what} {name} = {value!r} must be a number, string, "
                    "boolean, None or a tuple of them"
                )
    if eps is not None and (
        isinstance(eps, bool)
        or not isinstance(eps, (int, float))
        or not eps > 0
        or eps == float("inf")
    ):
        raise SpecError(
            f"implementation: default eps {eps!r} must be a positive number"
        )


def _plain(value: object, depth: int = 0) -> bool:
    if value is None or isinstance(value, (bool, int, str)):
        return not isinstance(value, str) or len(value) <= 200
    if isinstance(value, float):
        return value == value and abs(value) != float("inf")
    if isinstance(value, tuple) and depth < 2 and len(value) <= 16:
        return all(_plain(v, depth + 1) for v in value)
    return False
