"""The README's "Add a model family" example runs as written and prints what the README shows.

The block imports ``mup_config``: the module of the README's codegen command (Muon-Kimi on
hidden matrices, AdamW on the rest, base 256 x 4), written here to a fresh folder.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from spectral.codegen import render  # noqa: E402

pytestmark = pytest.mark.generated  # also run on the --vendor form

README = Path(__file__).resolve().parents[2] / "README.md"


def _section_blocks() -> tuple[str, str]:
    """The section's python block and the text block right after it."""
    text = README.read_text(encoding="utf-8")
    section = re.split(r"^## ", text, flags=re.M)
    body = next(part for part in section if part.startswith("Add a model family\n"))
    fences = re.findall(r"^```(\w*)\n(.*?)^```\n", body, flags=re.S | re.M)
    (code,) = [block for lang, block in fences if lang == "python"]
    (expected,) = [block for lang, block in fences if lang == "text"]
    return code, expected


def test_add_a_model_family_example_runs(tmp_path, monkeypatch):
    (tmp_path / "mup_config.py").write_text(
        render("muon-kimi", "adamw", base_width=256, base_depth=4), encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "mup_config", raising=False)
    code, expected = _section_blocks()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {"__name__": "readme_family"})  # noqa: S102
    assert out.getvalue() == expected
    monkeypatch.delitem(sys.modules, "mup_config", raising=False)
