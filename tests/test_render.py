"""Renderers: golden files for every format, markdown structure, LaTeX that compiles.

Regenerate the golden files after an intended change with::

    SPECTRAL_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_render.py

and review the diff of ``tests/golden/``.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
from fractions import Fraction
from pathlib import Path

import pytest
from rich.console import Console

from spectral import derive, render
from spectral.engine.result import Exponent
from spectral.render.layout import layout

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("SPECTRAL_UPDATE_GOLDEN") == "1"
CASES = [("adamw", 2), ("muon-kimi", 1), ("shampoo", 2), ("sgd", 2)]
IDS = [f"{o}-k{k}" for o, k in CASES]


def table_text(d, **kw) -> str:
    buf = io.StringIO()
    Console(width=120, file=buf, color_system=None).print(render.table(d, **kw))
    return buf.getvalue()


FORMATS = {
    "table.txt": table_text,
    "table-explain.txt": lambda d: table_text(d, explain=True),
    "md": render.markdown,
    "explain.md": lambda d: render.markdown(d, explain=True),
    "tex": render.latex,
    "standalone.tex": lambda d: render.latex(d, standalone=True),
    "json": render.json_text,
    "explain.json": lambda d: render.json_text(d, explain=True),
}


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"missing golden file {path}; run with SPECTRAL_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), (
        f"{name} differs from its golden file; if the change is intended, "
        "rerun with SPECTRAL_UPDATE_GOLDEN=1 and review the diff"
    )


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize(("optimizer", "k"), CASES, ids=IDS)
def test_golden(optimizer, k, fmt):
    # each golden is what `spectral derive` prints in that format: JSON lists every role
    # (the roles placed by their dimensions too), the other formats the paper's tables
    d = derive(optimizer, k=k, all_roles=fmt.endswith("json"))
    check_golden(f"{optimizer}-k{k}.{fmt}", FORMATS[fmt](d))


@pytest.mark.parametrize("fmt", ["md", "explain.md"])
def test_golden_all_roles(fmt):
    """`spectral derive adamw --all-roles`: every role's rules as people read them, the
    rank-down map a norm reads (normed_rank_down_weight) beside the plain one."""
    text = FORMATS[fmt](derive("adamw", k=2, all_roles=True))
    assert "Normed rank-down weights" in text
    check_golden(f"adamw-k2.all-roles.{fmt}", text)


def test_golden_input_kinds():
    d = derive("muon", k=2)
    check_golden("muon-k2-image.md", render.markdown(d, input_kind="image"))
    check_golden("muon-k2-language.tex", render.latex(d, input_kind="language"))


# --------------------------------------------------------------------------------------
# content
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exp", "text", "tex"),
    [
        ((0, 0), "η", r"\eta"),
        ((-1, 0), "η/r_n", r"\eta/r_n"),
        ((Fraction(1, 2), 0), "η·√r_n", r"\eta\sqrt{r_n}"),
        ((0, -2), "η/r_L²", r"\eta/r_L^{2}"),
        ((-1, -1), "η/(r_n r_L)", r"\eta/(r_n r_L)"),
        ((1, 1), "η·r_n r_L", r"\eta r_n r_L"),
        ((Fraction(-1, 2), 1), "η·r_L/√r_n", r"\eta r_L/\sqrt{r_n}"),
        ((Fraction(3, 4), 0), "η·r_n³ᐟ⁴", r"\eta r_n^{3/4}"),
        ((Fraction(-1, 2), Fraction(-1, 2)), "η/√(r_n r_L)", r"\eta/\sqrt{r_n r_L}"),
        ((Fraction(-1, 2), -1), "η/(r_L√r_n)", r"\eta/(r_L\sqrt{r_n})"),
        ((Fraction(1, 2), Fraction(-1, 2)), "η·√r_n/√r_L", r"\eta\sqrt{r_n}/\sqrt{r_L}"),
        ((2, 2), "η·(r_n r_L)²", r"\eta(r_n r_L)^{2}"),
    ],
)
def test_ratio_forms(exp, text, tex):
    e = Exponent(Fraction(exp[0]), Fraction(exp[1]))
    assert render.text_ratio("η", e) == text
    assert render.latex_ratio(r"\eta", e) == tex


def test_paper_entries_adamw():
    lay = layout(derive("adamw", k=2))
    cells = {
        row.hp: dict(zip([c for c, _ in lay.columns], row.cells, strict=True)) for row in lay.rows
    }
    assert [label for _, label in lay.columns] == [
        "Input weights", "Hidden weights", "Output weights", "Router weights", "Input biases",
        "Hidden biases",
    ]  # fmt: skip
    assert [row.label for row in lay.rows] == [
        "Block Multiplier", "Initial Variance", "Learning Rate", "Weight Decay", "AdamW ε"
    ]  # fmt: skip
    assert cells["lr"]["hidden_weight"].latex == r"$\eta_{\mathrm{base}}/r_n$"
    assert cells["weight_decay"]["hidden_weight"].latex == r"$\lambda_{\mathrm{base}}r_n$"
    assert cells["eps"]["hidden_weight"].text == "ε_base/(r_n r_L)"
    assert cells["init_var"]["input_weight"].text == "σ²_base/d₀ or σ²_base"
    assert not cells["init_var"]["input_weight"].differs
    assert cells["multiplier"]["output_weight"].differs
    assert not cells["lr"]["output_weight"].differs


def test_matrix_only_optimizer_has_no_bias_columns():
    lay = layout(derive("muon-kimi", k=2))
    assert [c for c, _ in lay.columns] == ["input_weight", "hidden_weight", "output_weight", "router_weight"]
    assert "eps" not in [row.hp for row in lay.rows]


def test_latex_highlights_like_the_paper():
    tex = render.latex(derive("muon", k=2))
    for needle in (
        r"\toprule",
        r"\midrule",
        r"\bottomrule",
        r"\renewcommand{\hl}[1]{\textcolor{purple}{#1}}",
        r"\renewcommand{\ll}[1]{\textcolor{gray}{#1}}",
        r"& \hl{$\eta_{\mathrm{base}}\sqrt{r_n}$} \ \ll{($\eta_{\mathrm{base}}$)}",
        r"& \hl{$\lambda_{\mathrm{base}}/\sqrt{r_n}$} \ \ll{($\lambda_{\mathrm{base}}$)}",
        r"& $\sigma^2_{\mathrm{base}}/d_0$ or $\sigma^2_{\mathrm{base}}$",
        "verified: 21 condition terms",
    ):
        assert needle in tex
    assert r"\documentclass" not in tex
    doc = render.latex(derive("muon", k=2), standalone=True)
    assert doc.startswith(r"\documentclass{article}") and doc.rstrip().endswith(r"\end{document}")


@pytest.mark.parametrize(("kind", "text"), [("image", "σ²_base/d₀"), ("language", "σ²_base")])
def test_input_kind(kind, text):
    lay = layout(derive("adamw", k=2), input_kind=kind)
    assert lay.rows[1].cells[0].text == text
    with pytest.raises(ValueError):
        layout(derive("adamw", k=2), input_kind="audio")


def test_json_is_exactly_to_dict():
    d = derive("adamw", k=2)
    text = render.json_text(d)
    assert text.endswith("}\n")
    assert text == json.dumps(d.to_dict(), indent=2, ensure_ascii=False) + "\n"
    explained = json.loads(render.json_text(d, explain=True))
    assert list(explained) == ["optimizer", "k", "verified", "rules", "tie_embeddings", "explain"]
    assert {k: explained[k] for k in d.to_dict()} == d.to_dict()
    assert len(explained["explain"]["entries"]) == len(d.entries)
    assert sum(c["terms"] for c in explained["explain"]["checks"]) == d.terms_checked


def test_explain_mentions_every_entry_and_check():
    d = derive("sgd", k=2)
    md = render.markdown(d, explain=True)
    for e in d.entries:
        assert render.markdown_escape(e.explanation) in md
    for c in d.checks:
        assert render.markdown_escape(c.description) in md
    text = table_text(d, explain=True)
    assert "How each rule was derived" in text and f"{d.terms_checked} condition terms" in text


def parse_markdown_tables(md: str) -> list[list[list[str]]]:
    """Split GFM tables into rows of cells (an escaped ``\\|`` is not a separator)."""
    tables, current = [], []
    for line in md.splitlines():
        if line.startswith("|"):
            assert line.endswith("|"), line
            body = line[1:-1].replace("\\|", "\0")
            current.append([c.strip().replace("\0", "|") for c in body.split("|")])
        elif current:
            tables.append(current)
            current = []
    if current:
        tables.append(current)
    return tables


@pytest.mark.parametrize(("optimizer", "k"), CASES, ids=IDS)
def test_markdown_is_a_table(optimizer, k):
    d = derive(optimizer, k=k)
    tables = parse_markdown_tables(render.markdown(d, explain=True))
    assert len(tables) == 3  # rules, explanations, checks
    for rows in tables:
        assert len({len(r) for r in rows}) == 1, "every row has the same number of cells"
        assert all(set(c) <= set("-:") and c for c in rows[1]), "second row is the separator"
    rules = tables[0]
    assert len(rules[0]) == len(d.roles) + 1
    assert len(rules) == 2 + len(d.hps)


def test_user_text_is_escaped():
    from spectral.engine.spec_file import parse_spec

    spec = parse_spec(
        {
            "name": "evil",
            "update_norm": "n_in",
            "eps": "G",
            "eps_label": r"x | \input{/etc/passwd} $ & % # _ {} ~ ^ <b> ε",
        }
    )
    d = derive(spec, k=2)
    tex = render.latex(d, explain=True)
    assert r"\input{" not in tex
    assert r"\textbackslash{}input\{/etc/passwd\}" in tex
    md = render.markdown(d)
    assert len({len(r) for r in parse_markdown_tables(md)[0]}) == 1
    assert "<b>" not in md


# --------------------------------------------------------------------------------------
# LaTeX compiles
# --------------------------------------------------------------------------------------


def _pdflatex() -> str:
    exe = shutil.which("pdflatex")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail(
                "pdflatex is required under CI (apt-get install texlive-latex-base "
                "texlive-latex-recommended)"
            )
        pytest.skip("pdflatex not installed")
    return exe


@pytest.mark.parametrize(("optimizer", "k"), CASES, ids=IDS)
def test_latex_compiles(optimizer, k, tmp_path):
    exe = _pdflatex()
    doc = render.latex(derive(optimizer, k=k), standalone=True, explain=True)
    (tmp_path / "rules.tex").write_text(doc, encoding="utf-8")
    proc = subprocess.run(
        [exe, "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape", "rules.tex"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert (tmp_path / "rules.pdf").stat().st_size > 0
    log = (tmp_path / "rules.log").read_text(errors="replace")
    assert "Overfull \\hbox" not in log


ALONG = {
    "along.table.txt": lambda d: table_text(d, along=True),
    "along.md": lambda d: render.markdown(d, along=True),
    "along.tex": lambda d: render.latex(d, along=True),
    "along.standalone.tex": lambda d: render.latex(d, standalone=True, along=True),
    "along.json": lambda d: render.json_text(d, along=True),
}


@pytest.mark.parametrize("fmt", sorted(ALONG))
@pytest.mark.parametrize("optimizer", ["adamw", "sgd", "muon-kimi"])
def test_golden_along(optimizer, fmt):
    # `spectral derive OPT --horizon`: the width-depth table unchanged, then the rules along
    # the horizon and the batch (an opt-in section, so the goldens above stay as they were)
    d = derive(optimizer, k=2, all_roles=fmt == "along.json")
    text = ALONG[fmt](d)
    check_golden(f"{optimizer}-k2.{fmt}", text)
    plain = {"along.md": render.markdown, "along.tex": render.latex}.get(fmt)
    if plain is not None:
        assert text.startswith(plain(d))


def test_along_json_is_the_default_json_plus_one_key():
    d = derive("adamw", k=2, all_roles=True)
    plain, along = json.loads(render.json_text(d)), json.loads(render.json_text(d, along=True))
    assert {k: v for k, v in along.items() if k != "along"} == plain
    assert along["along"]["hidden_weight"]["lr"]["r_D"] == "-8/25"
    assert along["along"]["hidden_weight"]["weight_decay"] == {
        "r_D": "-17/25",
        "r_B": "1/2",
        "basis": d.along("hidden_weight")[1].basis,
    }
