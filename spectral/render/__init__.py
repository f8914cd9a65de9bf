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
from typing import TYPE_CHECKING, Any

from ..engine.result import Derivation
from ..engine.roles import HP_LABELS, role
from .ratios import BASES, InputKind, latex_ratio, text_ratio
from ..spec import show
from ..text import for_latex, for_markdown, for_terminal

if TYPE_CHECKING:
    from ..templating import Kind

__all__ = [
    "BASES",
    "FORMATS",
    "InputKind",
    "AXIS_LEGEND",
    "along_notes",
    "caption",
    "catalog_rows",
    "catalog_table",
    "json_text",
    "latex",
    "latex_escape",
    "latex_ratio",
    "markdown",
    "markdown_escape",
    "render",
    "table",
    "text_ratio",
]

FORMATS = ("table", "markdown", "latex", "json")

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
# escaping user text (optimizer names, ε labels)
# --------------------------------------------------------------------------------------

# Escaping lives in spectral.text, one function per medium; these names are kept.
latex_escape = for_latex
markdown_escape = for_markdown


# --------------------------------------------------------------------------------------
# what every format shows (the table's layout: spectral.render.layout, imported when one is drawn)
# --------------------------------------------------------------------------------------


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
    from ..templating import environment  # jinja2: not for JSON

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
    from .layout import layout

    return _render(
        "text",
        "rules.md.j2",
        d=d,
        caption=caption(d),
        layout=layout(d, input_kind),
        along_legend=AXIS_LEGEND,
        **_sections(d, explain, along),
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
    from .layout import layout

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
        **_sections(d, explain, along),
    )


def _sections(d: Derivation, explain: bool, along: bool) -> dict[str, Any]:
    """What the markdown and LaTeX tables show beside the rules: how each arose and the
    verification (``explain``), the roles left out, and the rules along the horizon and the
    batch (``along``)."""
    from .layout import along_layout

    return {
        "explain": explain,
        "entries": _explain_rows(d) if explain else [],
        "checks": _check_rows(d) if explain else [],
        "omitted": omitted_notes(d),
        "along": along_layout(d) if along else None,
        "along_notes": along_notes(d) if along else [],
    }


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

    from .layout import layout

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

    from .layout import along_layout

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
