"""Renderers: pure functions of a :class:`~spectral.engine.result.Derivation`; nothing prints or writes.

* :func:`table` builds a ``rich`` renderable (the CLI prints it),
* :func:`markdown` and :func:`latex` return strings rendered from the jinja2 templates in
  the top-level ``templates`` package; :func:`json_text` returns ``json.dumps`` of
  ``Derivation.to_dict()``.

The layout follows the paper's tables: rows are hyperparameters (block multiplier, initial
variance, learning rate, weight decay and, where the optimizer has one, its ε), columns are
the roles present; entries are in ratio form ``base × r_n^a r_L^b`` with
``r_n = n/n_base``, ``r_L = L/L_base``. A μP entry that differs from standard
parameterisation (exponent ≠ (0, 0)) is highlighted with the SP value beside it.

>>> from spectral import derive
>>> text_ratio("η_base", derive("adamw", k=2).rule("hidden_weight", "lr"))
'η_base/r_n'
>>> latex_ratio(r"\\eta_{\\mathrm{base}}", derive("muon", k=2).rule("input_weight", "lr"))
'\\\\eta_{\\\\mathrm{base}}\\\\sqrt{r_n}'
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

from .engine.result import Derivation, Exponent
from .engine.roles import HP_LABELS, role
from .spec import show
from .templating import Kind, environment
from .text import for_latex, for_markdown, for_terminal

__all__ = [
    "BASES",
    "FORMATS",
    "InputKind",
    "AXIS_LEGEND",
    "along_layout",
    "along_notes",
    "caption",
    "catalog_rows",
    "catalog_table",
    "json_text",
    "latex",
    "latex_escape",
    "latex_ratio",
    "layout",
    "markdown",
    "markdown_escape",
    "render",
    "table",
    "text_ratio",
]

InputKind = Literal["image", "language"]
FORMATS = ("table", "markdown", "latex", "json")

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

AXIS_LEGEND = (
    "Along the horizon and the batch, width and depth held: r_D = D/D_base (training tokens; "
    "steps × batch) and r_B = B/B_base (batch size); weight decay keeps the timescale "
    "τ = B/(ηλD), so η·λ·D/B stays the base's; highlighted entries move."
)

LEGEND = (
    "r_n = n/n_base and r_L = L/L_base are the width and depth ratios to the base model; "
    "highlighted entries differ from SP (the SP value is in parentheses)."
)

# --------------------------------------------------------------------------------------
# exponents as text and LaTeX
# --------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------
# escaping user text (optimizer names, ε labels)
# --------------------------------------------------------------------------------------

# Escaping lives in spectral.text, one function per medium; these names are kept.
latex_escape = for_latex
markdown_escape = for_markdown


# --------------------------------------------------------------------------------------
# layout shared by every format
# --------------------------------------------------------------------------------------


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


def along_notes(d: Derivation) -> list[str]:
    """One line per HP: where its rule along the horizon and the batch comes from."""
    seen: dict[str, str] = {}
    for a in d.axes:
        label = {"eps": d.spec.eps_label, "momentum": "1 - β"}.get(a.hp) or HP_LABELS[a.hp]
        seen.setdefault(f"{label}: {a.basis}.", "")
    return list(seen)


def caption(d: Derivation) -> str:
    """``μP rules for adamw (k = 2) — verified: 28 condition terms``."""
    return f"μP rules for {d.optimizer} (k = {d.k}) — verified: {d.terms_checked} condition terms"


def _explain_rows(d: Derivation) -> list[dict[str, str]]:
    out = []
    for e in d.entries:
        hp = d.spec.eps_label if e.hp == "eps" else HP_LABELS[e.hp]
        out.append(
            {
                "role": e.role,
                "role_label": role(e.role).label,
                "hp": e.hp,
                "hp_label": hp,
                "rule": text_ratio(BASES[e.hp][0], e.exponent),
                "condition": e.condition,
                "explanation": e.explanation,
            }
        )
    return out


def _check_rows(d: Derivation) -> list[dict[str, Any]]:
    return [
        {"label": c.label, "description": c.description, "terms": c.terms, "holds": c.holds}
        for c in d.checks
    ]


# --------------------------------------------------------------------------------------
# templates
# --------------------------------------------------------------------------------------


def _render(kind: Kind, template: str, **context: Any) -> str:
    return environment(kind).get_template(template).render(**context)


# --------------------------------------------------------------------------------------
# formats
# --------------------------------------------------------------------------------------


def markdown(
    d: Derivation,
    *,
    explain: bool = False,
    input_kind: InputKind | None = None,
    along: bool = False,
) -> str:
    """A GitHub-flavoured markdown table (plus, with ``explain``, how each rule arose; with
    ``along``, the rules along the horizon and the batch)."""
    return _render(
        "text",
        "rules.md.j2",
        d=d,
        caption=caption(d),
        layout=layout(d, input_kind),
        explain=explain,
        entries=_explain_rows(d) if explain else [],
        checks=_check_rows(d) if explain else [],
        omitted=omitted_notes(d),
        along=along_layout(d) if along else None,
        along_notes=along_notes(d) if along else [],
        along_legend=AXIS_LEGEND,
    )


def latex(
    d: Derivation,
    *,
    standalone: bool = False,
    explain: bool = False,
    input_kind: InputKind | None = None,
    along: bool = False,
) -> str:
    """A booktabs table in the paper's style; ``standalone`` makes a compilable document.

    The table needs ``booktabs`` and ``xcolor``. With ``explain`` the derivation of each
    entry and the verification summary follow as LaTeX comments.
    """
    lay = layout(d, input_kind)
    return _render(
        "latex",
        "rules_standalone.tex.j2" if standalone else "rules.tex.j2",
        d=d,
        name=latex_escape(d.optimizer),
        label="tab:mup-" + "".join(c if c.isalnum() else "-" for c in d.optimizer) + f"-k{d.k}",
        layout=lay,
        colspec="c" * (len(lay.columns) + 1),
        narrow=len(lay.columns) > 3,
        input_kind=input_kind,
        has_input_variance="input_weight" in d.roles,
        explain=explain,
        entries=_explain_rows(d) if explain else [],
        checks=_check_rows(d) if explain else [],
        omitted=omitted_notes(d),
        along=along_layout(d) if along else None,
        along_notes=along_notes(d) if along else [],
    )


def json_text(d: Derivation, *, explain: bool = False, along: bool = False) -> str:
    """Exactly ``d.to_dict()`` as indented JSON; ``explain`` adds an ``"explain"`` key.

    The one format not rendered from a template: it is ``json.dumps`` of data, so that the
    default shape is byte-for-byte ``to_dict()`` (and jinja2 is not imported for it).
    """
    document: dict[str, Any] = d.to_dict(along=along)
    if explain:
        document["explain"] = {"entries": _explain_rows(d), "checks": _check_rows(d)}
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def omitted_notes(d: Derivation) -> list[str]:
    """One line per role asked for but not derived, with why (``Derivation.omitted``)."""
    return [f"{role(r).label} ({r}): {why}." for r, why in d.omitted]


def table(
    d: Derivation,
    *,
    explain: bool = False,
    input_kind: InputKind | None = None,
    along: bool = False,
) -> Any:
    """A ``rich`` renderable: the rules table (with ``explain``, two more tables; with
    ``along``, the rules along the horizon and the batch)."""
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    lay = layout(d, input_kind)
    t = Table(
        title=Text(for_terminal(caption(d)), style="bold"),
        caption=Text("\n".join([LEGEND, *omitted_notes(d)]), style="dim"),
        box=box.SIMPLE_HEAD,
        show_lines=False,
    )
    t.add_column("")
    for _, label in lay.columns:
        t.add_column(Text(for_terminal(label)), justify="left", overflow="fold")
    for row in lay.rows:
        cells: list[Any] = [Text(for_terminal(row.label), style="bold")]
        for c in row.cells:
            if c.differs:
                cells.append(Text.assemble((c.text, "bold magenta"), (f" ({c.sp_text})", "dim")))
            else:
                cells.append(Text(c.text))
        t.add_row(*cells)
    extra: list[Any] = []
    if along:
        extra.append(_along_table(d))
    if not explain:
        return Group(t, *extra) if extra else t
    how = Table(title=Text("How each rule was derived", style="bold"), box=box.SIMPLE_HEAD)
    for name in ("Role", "HP", "Rule", "Condition", "Explanation"):
        how.add_column(name, overflow="fold")
    for e in _explain_rows(d):
        how.add_row(
            Text(e["role_label"]),
            Text(for_terminal(e["hp_label"])),
            Text(e["rule"]),
            Text(e["condition"]),
            Text(e["explanation"]),
        )
    checks = Table(
        title=Text(f"Verification: {d.terms_checked} condition terms", style="bold"),
        caption=Text(d.verification_summary, style="dim"),
        box=box.SIMPLE_HEAD,
    )
    for name, justify in (
        ("Label", "left"),
        ("Checks", "left"),
        ("Terms", "right"),
        ("Holds", "left"),
    ):
        checks.add_column(name, justify=justify)
    for c in d.checks:
        checks.add_row(
            Text(c.label), Text(c.description), Text(str(c.terms)), Text("yes" if c.holds else "NO")
        )
    return Group(t, how, checks, *extra)


def _along_table(d: Derivation) -> Any:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    lay = along_layout(d)
    t = Table(
        title=Text("Along the horizon D and the batch B", style="bold"),
        caption=Text("\n".join([AXIS_LEGEND, *along_notes(d)]), style="dim"),
        box=box.SIMPLE_HEAD,
    )
    t.add_column("")
    for _, label in lay.columns:
        t.add_column(Text(for_terminal(label)), justify="left", overflow="fold")
    for row in lay.rows:
        cells: list[Any] = [Text(for_terminal(row.label), style="bold")]
        for c in row.cells:
            cells.append(Text(c.text, style="bold magenta") if c.differs else Text(c.text))
        t.add_row(*cells)
    return t


def render(
    d: Derivation,
    fmt: str = "markdown",
    *,
    explain: bool = False,
    standalone: bool = False,
    input_kind: InputKind | None = None,
    along: bool = False,
) -> str:
    """Render ``d`` as ``markdown``, ``latex`` or ``json`` text (see :func:`table` for rich)."""
    if fmt == "markdown":
        return markdown(d, explain=explain, input_kind=input_kind, along=along)
    if fmt == "latex":
        return latex(d, standalone=standalone, explain=explain, input_kind=input_kind, along=along)
    if fmt == "json":
        return json_text(d, explain=explain, along=along)
    raise ValueError(f"unknown format {fmt!r}; text formats: markdown, latex, json")


# --------------------------------------------------------------------------------------
# the catalog (`spectral list`)
# --------------------------------------------------------------------------------------


def catalog_rows(specs: Iterable[Any]) -> list[dict[str, str]]:
    """One dict per declaration: name, applies_to, update_norm, eps, summary, paper."""
    return [
        {
            "name": s.name,
            "applies_to": s.applies_to,
            "update_norm": show(s.update_norm),
            "eps": "" if s.eps is None else show(s.eps),
            "summary": s.summary,
            "paper": s.paper,
        }
        for s in specs
    ]


def catalog_table(rows: list[dict[str, str]]) -> Any:
    """A ``rich`` table of :func:`catalog_rows`."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    t = Table(
        title=Text("Optimizer catalog", style="bold"),
        caption="update_norm = ‖A‖_R of the update direction; spectral derive NAME --explain",
        box=box.SIMPLE_HEAD,
    )
    # The declaration itself is what a user reads here: never truncate it.
    t.add_column("name", no_wrap=True, style="bold")
    t.add_column("applies to", no_wrap=True)
    t.add_column("update_norm", overflow="fold")
    t.add_column("eps", overflow="fold")
    t.add_column("idealised update", ratio=1)
    for r in rows:
        keys = ("name", "applies_to", "update_norm", "eps", "summary")
        t.add_row(*(Text(for_terminal(r[k])) for k in keys))
    return t
