"""The one Jinja environment over the ``spectral.templates`` package (the repository's templates/).

Every renderer that fills a template (rules tables, sweep reports, generated modules) gets
its environment here, so that the options — strict undefined names, no autoescaping,
blocks that leave no blank lines, the trailing newline kept — are the same everywhere.
LaTeX templates use other delimiters (``<% %>``, ``<< >>``, ``<# #>``), because ``{%`` and
``{#1}`` are ordinary LaTeX.

Filters available in every template: ``md`` (:func:`spectral.text.for_markdown`), ``tex``
(:func:`spectral.text.for_latex`) and ``comment`` (one line, whitespace collapsed).
jinja2 is imported on first use, so importing this module costs nothing.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any, Literal

from .text import for_latex, for_markdown

__all__ = ["Kind", "environment"]

Kind = Literal["text", "latex"]
"""``text``: Jinja's own delimiters (markdown, Python); ``latex``: ``<% %>``, ``<< >>``, ``<# #>``."""

_LATEX_DELIMITERS = {
    "block_start_string": "<%",
    "block_end_string": "%>",
    "variable_start_string": "<<",
    "variable_end_string": ">>",
    "comment_start_string": "<#",
    "comment_end_string": "#>",
}


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())


@cache
def environment(kind: Kind = "text") -> Any:
    """The ``jinja2.Environment`` of ``kind``, built once per process."""
    import jinja2

    from spectral import templates

    options: dict[str, Any] = {
        "loader": jinja2.FileSystemLoader(Path(templates.__file__).parent),
        "undefined": jinja2.StrictUndefined,
        "trim_blocks": True,
        "lstrip_blocks": True,
        "keep_trailing_newline": True,
        "autoescape": False,
    }
    if kind == "latex":
        options.update(_LATEX_DELIMITERS)
    elif kind != "text":
        raise ValueError(f"template kind must be 'text' or 'latex', not {kind!r}")
    env = jinja2.Environment(**options)
    env.filters["md"] = for_markdown
    env.filters["tex"] = for_latex
    env.filters["comment"] = _one_line
    return env
