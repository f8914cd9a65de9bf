"""The one Jinja environment: every rendered text (tables, reports, config modules)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["environment"]


@cache
def environment() -> Any:
    """Templates from :mod:`spectral.templates`; strict (an unknown name is an error)."""
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    from spectral import templates

    return Environment(
        loader=FileSystemLoader(Path(templates.__file__).parent),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
