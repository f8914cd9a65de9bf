"""A rule as text and LaTeX: ``base × r_n^a r_L^b`` in ratio form, and each HP's base symbol.

Shared by every rendered format (:mod:`spectral.render`, :mod:`spectral.render.layout`); no
dataclass and no third-party import, so ``spectral derive --format json`` pays nothing for it.

"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from ..engine.result import Exponent

__all__ = ["AXIS_BASES", "BASES", "InputKind", "latex_ratio", "text_ratio"]

InputKind = Literal["image", "language"]
"""What the input layer reads: its init variance is written σ²_base/d₀ (image) or σ²_base
(language)."""

BASES: dict[str, tuple[str, str]] = {
    "multiplier": ("α_base", r"\alpha_{\mathrm{base}}"),
    "init_var": ("σ²_base", r"\sigma^2_{\mathrm{base}}"),
    "lr": ("η_base", r"\eta_{\mathrm{base}}"),
    "weight_decay": ("λ_base", r"\lambda_{\mathrm{base}}"),
    "eps": ("ε_base", r"\varepsilon_{\mathrm{base}}"),
}
"""HP → (plain-text base, LaTeX base)."""

AXIS_BASES: dict[str, tuple[str, str]] = {
    "lr": BASES["lr"],
    "weight_decay": BASES["weight_decay"],
    "eps": BASES["eps"],
    "momentum": ("(1-β)_base", r"(1-\beta)_{\mathrm{base}}"),
}
"""HP → (plain-text base, LaTeX base) of the rules along the horizon and the batch."""


def _latex_power(symbol: str, e: Fraction) -> str:
    if e == 1:
        return symbol
    if e == Fraction(1, 2):
        return rf"\sqrt{{{symbol}}}"
    return f"{symbol}^{{{e}}}"


def _latex_product(parts: list[tuple[str, Fraction]]) -> str:
    """``r_n r_L``, ``r_n\\sqrt{r_L}``, ``\\sqrt{r_n r_L}`` (as :func:`Exponent.ratio`)."""
    if len(parts) == 2 and parts[0][1] == parts[1][1] and parts[0][1] != 1:
        e = parts[0][1]
        inner = " ".join(sym for sym, _ in parts)
        return rf"\sqrt{{{inner}}}" if e == Fraction(1, 2) else f"({inner})^{{{e}}}"
    parts = sorted(parts, key=lambda p: p[1].denominator != 1)  # integer powers first
    out = ""
    for sym, e in parts:
        text = _latex_power(sym, e)
        out += (" " if out and not text.startswith("\\") else "") + text
    return out


def text_ratio(base: str, exp: Exponent) -> str:
    """The engine's ratio form: ``η_base/r_n``, ``λ_base·√r_n``, ``ε_base/(r_n r_L)``."""
    return exp.ratio(base)


def latex_ratio(base: str, exp: Exponent, symbols: tuple[str, str] = ("r_n", "r_L")) -> str:
    r"""``\eta_{\mathrm{base}}/r_n``, ``\lambda_{\mathrm{base}}\sqrt{r_n}``, ``.../(r_n r_L)``
    (``symbols``: the two ratios' names, ``("r_D", "r_B")`` along the horizon and batch)."""
    pairs = ((symbols[0], exp.r_n), (symbols[1], exp.r_L))
    num = [(s, e) for s, e in pairs if e > 0]
    den = [(s, -e) for s, e in pairs if e < 0]
    out = base
    if num:
        top = _latex_product(num)
        out += (" " if base[-1:].isalpha() and top[0].isalpha() else "") + top  # `\eta r_n`
    if den:
        bottom = _latex_product(den)
        simple = len(den) == 1 or bottom.startswith(("\\sqrt", "("))
        out += f"/{bottom}" if simple else f"/({bottom})"
    return out
