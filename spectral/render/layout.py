"""The rules table's layout, shared by the terminal table, markdown and LaTeX: rows are
hyperparameters, columns the roles present, each cell the μP value in ratio form and, where
it differs, the SP value.

Imported when a table is rendered (:mod:`spectral.render`); ``spectral derive --format json``
does not build one.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..engine.result import Derivation, Exponent
from ..engine.roles import HP_LABELS, role
from .ratios import AXIS_BASES, BASES, InputKind, latex_ratio, text_ratio

__all__ = ["Cell", "Layout", "Row", "along_layout", "layout"]


@dataclass(frozen=True)
class Cell:
    """One table entry: the μP value and, where it differs, the SP value."""

    text: str
    latex: str
    """Complete LaTeX cell content (math already in ``$...$``), not yet highlighted."""
    sp_text: str
    sp_latex: str
    differs: bool


@dataclass(frozen=True)
class Row:
    hp: str
    label: str
    cells: tuple[Cell, ...]


@dataclass(frozen=True)
class Layout:
    columns: tuple[tuple[str, str], ...]
    """(role name, label) per column."""
    rows: tuple[Row, ...]


def _input_variance(exp: Exponent, input_kind: InputKind | None) -> tuple[str, str]:
    text_base, tex_base = BASES["init_var"]
    image = (text_ratio(text_base, exp) + "/d₀", f"${latex_ratio(tex_base, exp)}/d_0$")
    if exp.r_n == 0 and exp.r_L == 0:
        image = (f"{text_base}/d₀", f"${tex_base}/d_0$")
    language = (text_ratio(text_base, exp), f"${latex_ratio(tex_base, exp)}$")
    if input_kind == "image":
        return image
    if input_kind == "language":
        return language
    return f"{image[0]} or {language[0]}", f"{image[1]} or {language[1]}"


def _check_input_kind(input_kind: object) -> None:
    if input_kind not in (None, "image", "language"):
        raise ValueError(f"input_kind must be 'image', 'language' or None, not {input_kind!r}")


def layout(d: Derivation, input_kind: InputKind | None = None) -> Layout:
    """Rows (HPs) × columns (roles present) of ratio-form cells."""
    _check_input_kind(input_kind)
    rows = []
    for hp in d.hps:
        text_base, tex_base = BASES[hp]
        cells = []
        for r in d.roles:
            exp = d.rule(r, hp)
            if r == "input_weight" and hp == "init_var":
                text, tex = _input_variance(exp, input_kind)
                sp_text, sp_tex = text, tex
            else:
                text, tex = text_ratio(text_base, exp), f"${latex_ratio(tex_base, exp)}$"
                sp_text, sp_tex = text_base, f"${tex_base}$"
            cells.append(Cell(text, tex, sp_text, sp_tex, not exp.is_sp))
        label = d.spec.eps_label if hp == "eps" else HP_LABELS[hp]
        rows.append(Row(hp, label, tuple(cells)))
    columns = tuple((r, role(r).label) for r in d.roles)
    return Layout(columns, tuple(rows))


def along_layout(d: Derivation) -> Layout:
    """Rows (HPs along the horizon and batch) × columns (roles) of ``base × r_D^d r_B^b``."""
    rows = []
    hps = [a.hp for a in d.along(d.roles[0])] if d.roles else []
    for hp in hps:
        text_base, tex_base = AXIS_BASES[hp]
        cells = []
        for r in d.roles:
            (a,) = (a for a in d.along(r) if a.hp == hp)
            exp = Exponent(a.horizon, a.batch)
            cells.append(
                Cell(
                    exp.ratio(text_base, "r_D", "r_B"),
                    f"${latex_ratio(tex_base, exp, ('r_D', 'r_B'))}$",
                    text_base,
                    f"${tex_base}$",
                    not exp.is_sp,
                )
            )
        label = {"eps": d.spec.eps_label, "momentum": "1 - β (momenta)"}.get(hp) or HP_LABELS[hp]
        rows.append(Row(hp, label, tuple(cells)))
    return Layout(tuple((r, role(r).label) for r in d.roles), tuple(rows))
